// The outer state's part of a checkpoint (docs/checkpoints.md, Layout): the anchor, the outer
// optimizer's state and the sum of a sync in flight, whole in the global file when the dc does
// not shard them, else as pieces (ckpt/flat_pieces.hpp) that dc 0's members write into their
// own rank files in parallel; the error-feedback residuals, a piece of every rank's file laid out
// as the parameters. The load reads either layout into this run's shards, whatever the shard
// mode and ranks_per_dc that wrote it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/ckpt/flat_pieces.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/comm/communicator.hpp"
#include "autoloco/train/fragmented_outer.hpp"

namespace autoloco {

// Elements [span.begin(), + span.count()) of the vector `pieces` reads, as a host tensor of
// span.count() values (nothing of the vector's size is allocated).
torch::Tensor read_span(const FlatPieces& pieces, const ShardSpan& span);

// Global file, unsharded: the anchor and the optimizer's state whole.
void write_outer_whole(H5Writer& g, FragmentedOuter& outer);
// A rank file of dc 0, sharded: this member's shards of them.
void write_outer_pieces(H5Writer& k, FragmentedOuter& outer);
// The sum of the sync in flight of `fragment`: whole into the global file (unsharded) or this
// member's shard into its rank file (sharded, dc 0).
void write_pending_sum(H5Writer& w, FragmentedOuter& outer, int64_t fragment);
// Every rank's file: its residual of each fragment, as a piece. `members`/`member`: the
// hierarchical all-reduce's split, whose shard each residual is.
void write_residuals(H5Writer& k, FragmentedOuter& outer, int members, int member);

// Where the outer vectors of a checkpoint lie: its global file, and the rank files of its dc 0
// (the pieces of a sharded run).
struct OuterFiles {
  const H5Reader* global = nullptr;
  std::vector<const H5Reader*> pieces;
};

// Loads the anchor and the optimizer's state. Whole datasets are read by member 0 of each dc
// and broadcast over `intra` (every member calls it together); pieces are read by each member,
// only those that hold its shards.
void load_outer(const OuterFiles& files, FragmentedOuter& outer, Communicator& intra);
// Loads the sum of a sync in flight into `fragment`'s staging (collective as load_outer).
void load_pending_sum(const OuterFiles& files, FragmentedOuter& outer, int64_t fragment,
                      Communicator& intra);
// Loads the residuals of this member from its source dc's rank files (`files`), re-split when
// the checkpoint had another number of members. A checkpoint from before pieces holds one
// residual per rank: read from `own` when the split is the same, else they start from zero
// (returns false).
bool load_residuals(const std::vector<const H5Reader*>& files, const H5Reader& own, bool same_split,
                    FragmentedOuter& outer, int members, int member);

}  // namespace autoloco
