#include "autoloco/comm/text_collectives.hpp"

#include <fmt/format.h>

#include <climits>
#include <numeric>

#include "autoloco/comm/mpi_count.hpp"
#include "autoloco/util/mpi_check.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {

void broadcast_text(MPI_Comm comm, std::string& text, int root) {
  const Watch watch("a broadcast of text (a path, a checkpoint's name)");
  int64_t size = static_cast<int64_t>(text.size());
  AUTOLOCO_MPI(MPI_Bcast(&size, 1, MPI_INT64_T, root, comm));
  text.resize(static_cast<size_t>(size));
  if (size > 0) {
    AUTOLOCO_MPI(MPI_Bcast(text.data(), mpi_count(static_cast<size_t>(size), "text broadcast"),
                           MPI_CHAR, root, comm));
  }
}

std::vector<std::string> gather_text(MPI_Comm comm, const std::string& text, int root) {
  const Watch watch("a gather of text (the checkpoint files' sums)");
  int rank = 0, size = 1;
  AUTOLOCO_MPI(MPI_Comm_rank(comm, &rank));
  AUTOLOCO_MPI(MPI_Comm_size(comm, &size));
  int mine = mpi_count(text.size(), "text gather");
  std::vector<int> counts(static_cast<size_t>(size));
  AUTOLOCO_MPI(MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm));
  std::vector<int> offsets(static_cast<size_t>(size), 0);
  std::vector<char> all;
  if (rank == root) {
    std::exclusive_scan(counts.begin(), counts.end(), offsets.begin(), 0);
    all.resize(static_cast<size_t>(offsets.back() + counts.back()));
  }
  AUTOLOCO_MPI(MPI_Gatherv(text.data(), mine, MPI_CHAR, all.data(), counts.data(), offsets.data(),
                           MPI_CHAR, root, comm));
  std::vector<std::string> out;
  if (rank != root) return out;
  for (size_t r = 0; r < counts.size(); ++r) {
    out.emplace_back(all.data() + offsets[r], static_cast<size_t>(counts[r]));
  }
  return out;
}

bool all_succeeded(MPI_Comm comm, bool ok, std::string& message) {
  // After each rank's own part of a checkpoint or a resume: the slowest writer sets the pace.
  const Watch watch("the agreement that every rank succeeded (checkpoint, resume)");
  int rank = 0;
  AUTOLOCO_MPI(MPI_Comm_rank(comm, &rank));
  int mine = ok ? INT_MAX : rank;
  int first = INT_MAX;
  AUTOLOCO_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == INT_MAX) return true;
  std::string text = rank == first ? message : std::string();
  broadcast_text(comm, text, first);
  message = fmt::format("rank {}: {}", first, text);
  return false;
}

}  // namespace autoloco
