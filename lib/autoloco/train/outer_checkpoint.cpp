#include "autoloco/train/outer_checkpoint.hpp"

#include <fmt/format.h>

#include <functional>
#include <utility>

#include "autoloco/ckpt/flat_pieces.hpp"
#include "autoloco/train/checkpoint_tables.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

// One piece of `name` from the first `count` values of each of `parts` at `ranges` (all of
// them, in order).
void write_piece(H5Writer& w, const std::string& name, const std::vector<torch::Tensor>& parts,
                 const std::vector<FlatRange>& ranges) {
  const torch::Tensor all = torch::cat(parts);
  write_flat_piece(w, name, all.data_ptr<float>(), ranges);
}

// Each fragment's `part` (this member's shard of it; undefined: zeros) as one piece of `name`
// laid out as the parameters.
void write_shards(H5Writer& w, const std::string& name, FragmentedOuter& outer,
                  const std::function<torch::Tensor(size_t)>& part) {
  std::vector<torch::Tensor> values;
  std::vector<FlatRange> ranges;
  for (size_t p = 0; p < outer.size(); ++p) {
    const ShardSpan& span = outer.at(static_cast<int64_t>(p)).span();
    const torch::Tensor t = part(p);
    values.push_back(t.defined() ? host_flat(t).narrow(0, 0, span.count())
                                 : torch::zeros({span.count()}, torch::kFloat));
    for (const FlatRange& r : outer.plan().ranges(p, span.begin(), span.count()))
      ranges.push_back(r);
  }
  write_piece(w, name, values, ranges);
}

// The names of the outer optimizer's state (the same in every fragment).
std::vector<std::string> state_names(FragmentedOuter& outer) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : outer.at(0).optimizer().state())
    names.push_back(name);
  return names;
}

// The elements of the parameters' flat buffer that this member's outer state covers.
std::vector<FlatRange> member_ranges(FragmentedOuter& outer) {
  std::vector<FlatRange> out;
  for (size_t p = 0; p < outer.size(); ++p) {
    const ShardSpan& span = outer.at(static_cast<int64_t>(p)).span();
    for (const FlatRange& r : outer.plan().ranges(p, span.begin(), span.count()))
      out.push_back(r);
  }
  return out;
}

// A whole dataset of the global file that every member of a dc needs (the anchor, the outer
// state, a pending sum: up to |θ| each): member 0 reads it and broadcasts it inside the dc, so
// that a resume reads the global file once per dc. The dc first learns whether member 0 could
// read it, so that a damaged file fails every member rather than leaving them in the broadcast.
void read_whole_in_dc(const H5Reader& g, const std::string& name, torch::Tensor& host,
                      Communicator& intra) {
  std::string error;
  if (intra.rank() == 0) {
    try {
      g.read(name, host.data_ptr<float>(), host.numel());
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  int64_t ok = error.empty() ? 1 : 0;
  intra.broadcast(&ok, 1, DType::i64, 0);
  if (ok == 0) {
    throw CheckpointError(intra.rank() == 0 ? error
                                            : fmt::format("'{}': member 0 of this dc could not "
                                                          "read dataset '{}' (see its error)",
                                                          g.path(), name));
  }
  intra.broadcast(host.data_ptr<float>(), static_cast<size_t>(host.numel()), DType::f32, 0);
}

// Vector `name` of `numel` values with at least the elements of `want` filled in: whole from
// the global file (collective over the dc), else from the pieces. Undefined when neither holds it.
torch::Tensor read_vector(const OuterFiles& files, const std::string& name, int64_t numel,
                          const std::vector<FlatRange>& want, Communicator& intra) {
  torch::Tensor host = torch::zeros({numel}, torch::kFloat);
  if (files.global->has(name)) {
    read_whole_in_dc(*files.global, name, host, intra);
    return host;
  }
  FlatPieces pieces(name, numel);
  for (const H5Reader* file : files.pieces)
    pieces.add(*file, {});
  if (!pieces.found()) return torch::Tensor();
  pieces.read_into(host.data_ptr<float>(), want);
  return host;
}

}  // namespace

torch::Tensor read_span(const FlatPieces& pieces, const ShardSpan& span) {
  torch::Tensor values = torch::zeros({span.count()}, torch::kFloat);
  pieces.read_into(values.data_ptr<float>(), {FlatRange{span.begin(), span.count()}}, span.begin());
  return values;
}

void write_outer_whole(H5Writer& g, FragmentedOuter& outer) {
  write_tensor(g, "outer/anchor", outer.anchor());
  for (const auto& [name, tensor] : outer.optimizer_state()) {
    if (tensor.defined()) write_tensor(g, "outer/" + name, tensor);
  }
}

void write_outer_pieces(H5Writer& k, FragmentedOuter& outer) {
  write_shards(k, "outer/anchor", outer,
               [&](size_t p) { return outer.at(static_cast<int64_t>(p)).anchor(); });
  const std::vector<std::string> names = state_names(outer);
  for (size_t i = 0; i < names.size(); ++i) {
    const auto state = [&](size_t p) {
      return outer.at(static_cast<int64_t>(p)).optimizer().state()[i].second;
    };
    // The same on every member: a dc's fragments step together.
    bool any = false;
    for (size_t p = 0; p < outer.size(); ++p)
      any = any || state(p).defined();
    if (any) write_shards(k, "outer/" + names[i], outer, state);
  }
}

void write_pending_sum(H5Writer& w, FragmentedOuter& outer, int64_t fragment) {
  OuterSync& f = outer.at(fragment);
  if (!f.sharded()) {
    write_tensor(w, "sync/pending_sum", f.staging());
    return;
  }
  // Laid out as the fragment's vector, as the whole dataset is.
  const ShardSpan& span = f.span();
  write_piece(w, "sync/pending_sum", {host_flat(f.staging()).narrow(0, 0, span.count())},
              {FlatRange{span.begin(), span.count()}});
}

void write_residuals(H5Writer& k, FragmentedOuter& outer, int members, int member) {
  for (size_t p = 0; p < outer.size(); ++p) {
    // Laid out as the fragment's vector: the all-reduce's shard `member` of it.
    const ShardSpan span(outer.plan()[p].numel, members, member);
    const torch::Tensor& residual = outer.at(static_cast<int64_t>(p)).residual();
    write_piece(k, fmt::format("residual/{}", p), {host_flat(residual).narrow(0, 0, span.count())},
                {FlatRange{span.begin(), span.count()}});
  }
}

void load_outer(const OuterFiles& files, FragmentedOuter& outer, Communicator& intra) {
  const int64_t numel = outer.plan().numel();
  const std::vector<FlatRange> want = member_ranges(outer);
  const torch::Tensor anchor = read_vector(files, "outer/anchor", numel, want, intra);
  if (!anchor.defined()) {
    throw CheckpointError(fmt::format(
        "'{}': the checkpoint holds no outer/anchor, whole or in pieces: it is damaged; use "
        "another checkpoint",
        files.global->path()));
  }
  outer.load_anchor(anchor);
  for (const std::string& name : state_names(outer)) {
    // Undefined: written before the first outer step made it.
    outer.load_optimizer_state(name, read_vector(files, "outer/" + name, numel, want, intra));
  }
}

void load_pending_sum(const OuterFiles& files, FragmentedOuter& outer, int64_t fragment,
                      Communicator& intra) {
  OuterSync& f = outer.at(fragment);
  const ShardSpan& span = f.span();
  const torch::Tensor whole = read_vector(files, "sync/pending_sum", span.numel,
                                          {FlatRange{span.begin(), span.count()}}, intra);
  if (!whole.defined()) {
    throw CheckpointError(fmt::format(
        "'{}': a sync is in flight but the checkpoint holds no sync/pending_sum: it is damaged; "
        "use another checkpoint",
        files.global->path()));
  }
  torch::NoGradGuard no_grad;
  f.staging().narrow(0, 0, span.count()).copy_(whole.narrow(0, span.begin(), span.count()));
}

bool load_residuals(const std::vector<const H5Reader*>& files, const H5Reader& own, bool same_split,
                    FragmentedOuter& outer, int members, int member) {
  torch::NoGradGuard no_grad;
  // A checkpoint from before pieces: each rank's residual without its ranges.
  if (own.has("residual/0") && !own.has(piece_ranges_name("residual/0"))) {
    if (!same_split) return false;
    for (size_t p = 0; p < outer.size(); ++p) {
      torch::Tensor& residual = outer.at(static_cast<int64_t>(p)).residual();
      torch::Tensor host = torch::empty({residual.numel()}, torch::kFloat);
      own.read(fmt::format("residual/{}", p), host.data_ptr<float>(), host.numel());
      residual.copy_(host);
    }
    return true;
  }
  for (size_t p = 0; p < outer.size(); ++p) {
    const ShardSpan span(outer.plan()[p].numel, members, member);
    FlatPieces pieces(fmt::format("residual/{}", p), span.numel);
    for (const H5Reader* file : files)
      pieces.add(*file, {});
    // A checkpoint written without error feedback has none: it starts from zero.
    if (!pieces.found()) continue;
    torch::Tensor& residual = outer.at(static_cast<int64_t>(p)).residual();
    residual.zero_();
    residual.narrow(0, 0, span.count()).copy_(read_span(pieces, span));
  }
  return true;
}

}  // namespace autoloco
