// A dynamic table's rows between its shards and a checkpoint: the pages a
// shard answers (ps.proto TableRead) joined into one TableData per table
// shard, and the TableLoads that put saved table shards into the shards of
// any layout, each row going to the shard of its virtual row.
#pragma once

#include <vector>

#include "actors/variables/ps_client.hpp"

namespace actorps {

/// Adds `page`'s rows (a later page of the same table shard) to `whole`.
void append_page(pb::TableData& whole, const pb::TableData& page);

/// The loads that make shard `s` of `var` hold the rows of `saved` (a
/// table's shards as a checkpoint keeps them, each with its first_row and
/// virtual_rows) whose virtual rows it owns, in pages of `page_rows`. The
/// first empties the shard and sets its update count and admission sketch:
/// those of the saved shard of the same range (the same layout: exactly as
/// saved), else the highest update count among the saved shards it
/// overlaps and their sketches summed (counts of ids of other ranges only
/// make admission come sooner). Each row's last update moves with its
/// shard's update count, so rows keep their age (TTL).
std::vector<pb::TableLoad> table_loads(const sharded_variable& var, size_t s, const std::vector<pb::TableData>& saved,
                                       int64_t page_rows = 4096);

}  // namespace actorps
