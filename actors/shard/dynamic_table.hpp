// The storage of a dynamic embedding table on a PS shard: any 64-bit id maps
// to a row (values, then the optimizer's slots) created on first use, kept in
// slabs, admitted by a count-min sketch, evicted by TTL and a row cap (LRU).
// A plain data structure: the shard's logic and wire live in shard_core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/initializers.hpp"
#include "kernels/sparse.hpp"

namespace actorps {

struct dynamic_table_options {
  int dim = 0;                   // floats per row, > 0
  std::vector<float> slot_init;  // one per optimizer slot: its initial value (Adagrad's accumulator 0.1, Adam's 0)
  kernels::initializer init;     // a row's first values, seeded by the id (dynamic_table::read says how)
  uint32_t min_count = 1;        // sightings of an id before its row is created, 1..255 (1: at once, no sketch kept;
                                 // else 4 x 2^16 one-byte counters, up to 4 x 2^22 for 2 x max_rows)
  uint64_t ttl_steps = 0;        // 0: rows never expire; else a row not updated in the last ttl_steps steps goes
  uint64_t max_rows = 0;         // 0: no cap; else the least recently updated rows beyond it are evicted
};

/// One table's rows. Every operation is O(1) expected, but evict()
/// (O(rows evicted)) and for_each() (O(rows)). Not thread-safe: its shard
/// owns it. Row pointers stay valid until that row is erased or evicted.
class dynamic_table {
 public:
  /// Throws std::invalid_argument naming the field for dim <= 0 or
  /// min_count outside 1..255.
  explicit dynamic_table(dynamic_table_options o);

  const dynamic_table_options& options() const { return opts_; }
  /// Live rows.
  int64_t rows() const { return rows_; }
  /// dim * (1 + slot count): a row's values then each slot's dim floats.
  int row_floats() const { return row_floats_; }

  /// The dim values `id` reads: its row's, else the initial values its row
  /// would start with (the same on every shard, in every process, after any
  /// erase: they depend on the id and init only).
  void read(int64_t id, float* out) const;
  /// Its row (values then slots), nullptr when it has none.
  float* find(int64_t id);
  const float* find(int64_t id) const;
  /// One sighting of `id` (a gradient came for it): its row, created with its
  /// initial values and slot_init by this sighting when it is the
  /// min_count-th, else nullptr (not admitted: the caller drops the gradient,
  /// counted here in counts().dropped). A new row counts as last updated at
  /// the latest step the table saw (touch, evict, put), with 0 updates, and is
  /// the most recently used.
  float* admit(int64_t id);
  /// `id`'s row (which must exist: else std::out_of_range) was updated at
  /// table step `now` (the caller's non-decreasing update count): its update
  /// count + 1, its last update `now`, the most recently used.
  void touch(int64_t id, uint64_t now);
  /// Row `id`'s update count and last update step (0 without a row).
  uint32_t updates(int64_t id) const;
  uint64_t last_update(int64_t id) const;
  /// Evicts rows last updated more than ttl_steps before `now` (when
  /// ttl_steps > 0), then the least recently updated ones while rows() >
  /// max_rows (when max_rows > 0); returns how many it evicted. The TTL scan
  /// starts at the least recently used row and stops at the first one within
  /// the TTL, so it relies on touch()'s non-decreasing steps and on put()
  /// getting rows in for_each() order.
  int64_t evict(uint64_t now);
  /// Calls fn(id, const float* row, uint64_t last_update, uint32_t updates)
  /// for every live row, least recently updated first (so that put() in that
  /// order rebuilds the same eviction order). fn must not change the table.
  template <class F>
  void for_each(F&& fn) const {
    for (uint32_t r = head_; r != kNone; r = links(r).next) fn(key(r).id, row(r), key(r).last_update, links(r).updates);
  }
  /// for_each() in pages: at most `max` rows from the row of `from` (none:
  /// the first); returns the id of the row the next page starts at, none
  /// after the last. The table must not change between pages; `from` must
  /// be a live row's id (else std::out_of_range).
  template <class F>
  std::optional<int64_t> for_some(std::optional<int64_t> from, int64_t max, F&& fn) const {
    uint32_t r = head_;
    if (from) r = lookup(*from);
    if (from && r == kNone) throw std::out_of_range("dynamic_table: no row " + std::to_string(*from));
    for (; r != kNone && max > 0; r = links(r).next, --max) fn(key(r).id, row(r), key(r).last_update, links(r).updates);
    return r == kNone ? std::nullopt : std::optional<int64_t>(key(r).id);
  }
  /// Inserts or overwrites a row whole (restores, moves): no admission; it
  /// becomes the most recently used (and, like touch(), advances the table's
  /// latest step to last_update).
  void put(int64_t id, const float* row, uint64_t last_update, uint32_t updates);
  /// Removes `id`'s row (not counted as evicted); false when it had none.
  bool erase(int64_t id);

  struct counters {
    uint64_t admitted = 0, evicted = 0, dropped = 0;
  };
  const counters& counts() const { return counts_; }
  /// Sets them (a moved table shard's target takes its source's).
  void set_counts(const counters& c) { counts_ = c; }
  /// Bytes the table holds: slabs, index, per-row metadata, sketch. Slabs are
  /// kept once allocated (freed rows are reused), so it tracks the most rows
  /// ever live, not rows().
  size_t memory_bytes() const;
  /// The admission sketch as bytes (empty when min_count is 1) and back
  /// (snapshots, checkpoints: every replica must admit alike). set_sketch
  /// takes bytes from sketch_bytes() of a table with the same options, else
  /// throws std::invalid_argument.
  std::string sketch_bytes() const;
  /// Its size (0 when min_count is 1): a part of memory_bytes().
  size_t sketch_size() const { return sketch_.size(); }
  void set_sketch(const std::string& bytes);

 private:
  static constexpr uint32_t kNone = UINT32_MAX;  // no row: an empty index slot, the end of a list
  // Per-row metadata, 28 B in two arrays (one struct would be padded to 32).
  struct row_key {
    int64_t id;
    uint64_t last_update;
  };
  struct row_links {
    uint32_t updates, prev, next;  // prev/next: the LRU list, or next: the free list
  };
  struct slab {
    std::unique_ptr<float[]> floats;  // slab_rows × row_floats
    std::unique_ptr<row_key[]> keys;
    std::unique_ptr<row_links[]> links;
  };

  float* row(uint32_t r) const {
    return slabs_[r >> slab_shift_].floats.get() + size_t(r & slab_mask_) * size_t(row_floats_);
  }
  row_key& key(uint32_t r) const { return slabs_[r >> slab_shift_].keys[r & slab_mask_]; }
  row_links& links(uint32_t r) const { return slabs_[r >> slab_shift_].links[r & slab_mask_]; }

  size_t home(int64_t id) const;
  uint32_t lookup(int64_t id) const;
  uint32_t insert(int64_t id);
  void remove(uint32_t r);
  void index_add(uint32_t r);
  void grow_index();
  uint32_t allocate_row();
  void link_back(uint32_t r);
  void unlink(uint32_t r);
  void initial_values(int64_t id, float* out) const;
  bool sighted_enough(int64_t id);

  dynamic_table_options opts_;
  int row_floats_ = 0;
  uint32_t slab_shift_ = 0, slab_mask_ = 0;  // rows per slab: 1 << slab_shift_
  std::vector<slab> slabs_;
  uint32_t used_ = 0;                     // rows ever handed out (the rest of the last slab is fresh)
  uint32_t free_ = kNone;                 // freed rows, linked through links().next
  std::vector<uint32_t> index_;           // open addressing, linear probing: row numbers, kNone when empty
  uint32_t head_ = kNone, tail_ = kNone;  // LRU list: least, most recently used
  int64_t rows_ = 0;
  uint64_t clock_ = 0;           // the latest step seen: a new row's last update
  std::vector<uint8_t> sketch_;  // count-min: kSketchDepth rows of saturating counters (min_count > 1 only)
  uint32_t sketch_bits_ = 0;     // each row's counters: 2^sketch_bits_ (from max_rows)
  counters counts_;
};

// Where an id lives (kernels/sparse.hpp): shards own ranges of virtual rows.
using kernels::id_hash;
using kernels::kVirtualRows;
using kernels::virtual_row;

}  // namespace actorps
