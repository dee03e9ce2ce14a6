// The Communicator's defaults.
#include "autoloco/comm/communicator.hpp"

namespace autoloco {
namespace {

class Done final : public Communicator::Pending {
 public:
  void wait() override {}
};

}  // namespace

std::unique_ptr<Communicator::Pending> Communicator::start_allgather_in_place(
    void* data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets, DType type) {
  allgather_in_place(data, counts, offsets, type);
  return std::make_unique<Done>();
}

}  // namespace autoloco
