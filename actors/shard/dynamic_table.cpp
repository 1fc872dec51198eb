#include "actors/shard/dynamic_table.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "kernels/pointwise.hpp"

namespace actorps {

// actorps_shard is a unity build (cmake/build_speed.cmake): this file shares
// a translation unit with others, hence specific names and no using-declarations.
namespace {

// The admission sketch: 4 rows of 2^16 one-byte counters (256 KiB), more
// for a table with max_rows (sketch_bits); a row's counter is indexed by a
// 16-bit quarter of one 64-bit hash, widened by bits of a second one.
constexpr int kSketchDepth = 4;
constexpr uint32_t kSketchMinBits = 16, kSketchMaxBits = 22;

// Counters per sketch row (as bits): the next power of two >= 2 x max_rows,
// 2^16 to 2^22 (16 MiB), so that a capped shard, which sees a few times
// max_rows distinct ids between evictions, rarely takes an id seen once for
// one seen twice (2^16 for 100,000 distinct ids: about 1 in 5).
uint32_t sketch_bits(uint64_t max_rows) {
  uint32_t bits = kSketchMinBits;
  while (bits < kSketchMaxBits && (uint64_t(1) << bits) < 2 * max_rows) ++bits;
  return bits;
}
// Offsets the sketch's hash from id_hash: a shard owns a range of virtual
// rows (id_hash's top bits, nearly constant on one shard) and the index uses
// its low bits; the sketch's counters must not follow either.
constexpr uint64_t kSketchSalt = 0x9E3779B97F4A7C15ull;
constexpr size_t kFirstIndexSlots = 16;

}  // namespace

dynamic_table::dynamic_table(dynamic_table_options o) : opts_(std::move(o)) {
  if (opts_.dim <= 0)
    throw std::invalid_argument("dynamic_table: dim must be > 0 (is " + std::to_string(opts_.dim) + ")");
  if (opts_.min_count < 1 || opts_.min_count > 255)
    throw std::invalid_argument("dynamic_table: min_count must be 1..255 (is " + std::to_string(opts_.min_count) + ")");
  const int64_t floats = int64_t(opts_.dim) * int64_t(1 + opts_.slot_init.size());
  if (floats > std::numeric_limits<int>::max())
    throw std::invalid_argument("dynamic_table: dim " + std::to_string(opts_.dim) + " times " +
                                std::to_string(1 + opts_.slot_init.size()) + " rows of values and slots is too big");
  row_floats_ = int(floats);
  // Slabs of at most 1 MiB of floats, 64 to 4096 rows: a table of a million
  // rows wastes under 0.5% in its last slab, and a small table of wide rows
  // does not reserve 4096 of them.
  slab_shift_ = 12;
  while (slab_shift_ > 6 && (size_t(1) << slab_shift_) * size_t(row_floats_) * sizeof(float) > (size_t(1) << 20))
    --slab_shift_;
  slab_mask_ = (uint32_t(1) << slab_shift_) - 1;
  index_.assign(kFirstIndexSlots, kNone);
  sketch_bits_ = sketch_bits(opts_.max_rows);
  if (opts_.min_count > 1) sketch_.assign(size_t(kSketchDepth) << sketch_bits_, 0);
}

void dynamic_table::read(int64_t id, float* out) const {
  if (const float* r = find(id))
    std::copy(r, r + opts_.dim, out);
  else
    initial_values(id, out);
}

float* dynamic_table::find(int64_t id) {
  const uint32_t r = lookup(id);
  return r == kNone ? nullptr : row(r);
}

const float* dynamic_table::find(int64_t id) const {
  const uint32_t r = lookup(id);
  return r == kNone ? nullptr : row(r);
}

float* dynamic_table::admit(int64_t id) {
  if (id < 0) throw std::invalid_argument("dynamic_table: negative id " + std::to_string(id));
  if (const uint32_t r = lookup(id); r != kNone) return row(r);
  if (opts_.min_count > 1 && !sighted_enough(id)) {
    ++counts_.dropped;
    return nullptr;
  }
  float* values = row(insert(id));
  initial_values(id, values);
  for (size_t s = 0; s < opts_.slot_init.size(); ++s) {
    float* slot = values + size_t(opts_.dim) * (1 + s);
    std::fill(slot, slot + opts_.dim, opts_.slot_init[s]);
  }
  ++counts_.admitted;
  return values;
}

void dynamic_table::touch(int64_t id, uint64_t now) {
  const uint32_t r = lookup(id);
  if (r == kNone) throw std::out_of_range("dynamic_table::touch: id " + std::to_string(id) + " has no row");
  if (links(r).updates < UINT32_MAX) ++links(r).updates;
  key(r).last_update = now;
  clock_ = std::max(clock_, now);
  if (r != tail_) {
    unlink(r);
    link_back(r);
  }
}

uint32_t dynamic_table::updates(int64_t id) const {
  const uint32_t r = lookup(id);
  return r == kNone ? 0 : links(r).updates;
}

uint64_t dynamic_table::last_update(int64_t id) const {
  const uint32_t r = lookup(id);
  return r == kNone ? 0 : key(r).last_update;
}

int64_t dynamic_table::evict(uint64_t now) {
  clock_ = std::max(clock_, now);
  int64_t evicted = 0;
  if (opts_.ttl_steps > 0) {
    // The list is in last-update order: the expired rows are a prefix of it.
    while (head_ != kNone && now > key(head_).last_update && now - key(head_).last_update > opts_.ttl_steps) {
      remove(head_);
      ++evicted;
    }
  }
  if (opts_.max_rows > 0) {
    while (uint64_t(rows_) > opts_.max_rows) {
      remove(head_);
      ++evicted;
    }
  }
  counts_.evicted += uint64_t(evicted);
  return evicted;
}

void dynamic_table::put(int64_t id, const float* values, uint64_t last_update, uint32_t updates) {
  if (id < 0) throw std::invalid_argument("dynamic_table: negative id " + std::to_string(id));
  uint32_t r = lookup(id);
  if (r == kNone) {
    r = insert(id);
  } else if (r != tail_) {
    unlink(r);
    link_back(r);
  }
  std::copy(values, values + row_floats_, row(r));
  key(r).last_update = last_update;
  links(r).updates = updates;
  clock_ = std::max(clock_, last_update);
}

bool dynamic_table::erase(int64_t id) {
  const uint32_t r = lookup(id);
  if (r == kNone) return false;
  remove(r);
  return true;
}

size_t dynamic_table::memory_bytes() const {
  const size_t per_row = size_t(row_floats_) * sizeof(float) + sizeof(row_key) + sizeof(row_links);
  return slabs_.size() * (size_t(1) << slab_shift_) * per_row + slabs_.capacity() * sizeof(slab) +
         index_.capacity() * sizeof(uint32_t) + sketch_.capacity();
}

std::string dynamic_table::sketch_bytes() const { return std::string(sketch_.begin(), sketch_.end()); }

void dynamic_table::set_sketch(const std::string& bytes) {
  if (bytes.size() != sketch_.size())
    throw std::invalid_argument("dynamic_table::set_sketch: " + std::to_string(bytes.size()) + " bytes, expected " +
                                std::to_string(sketch_.size()) + " (min_count " + std::to_string(opts_.min_count) +
                                ")");
  std::copy(bytes.begin(), bytes.end(), sketch_.begin());
}

// --- the index: linear probing over 4-byte row numbers; ids compared through
// the rows' keys, so a slot costs 4 B, not the 12 B of an (id, row) pair.

size_t dynamic_table::home(int64_t id) const { return size_t(id_hash(id)) & (index_.size() - 1); }

uint32_t dynamic_table::lookup(int64_t id) const {
  const size_t mask = index_.size() - 1;
  for (size_t i = home(id);; i = (i + 1) & mask) {
    const uint32_t r = index_[i];
    if (r == kNone || key(r).id == id) return r;
  }
}

void dynamic_table::index_add(uint32_t r) {
  const size_t mask = index_.size() - 1;
  size_t i = home(key(r).id);
  while (index_[i] != kNone) i = (i + 1) & mask;
  index_[i] = r;
}

// At most half full: a miss (every new id, every read of an unadmitted one)
// probes 2.5 slots on average, each a look at a row's id elsewhere in memory.
void dynamic_table::grow_index() {
  index_.assign(index_.size() * 2, kNone);
  for (uint32_t r = head_; r != kNone; r = links(r).next) index_add(r);
}

// A new row for `id`: its key set, 0 updates, indexed, the most recently used.
uint32_t dynamic_table::insert(int64_t id) {
  if (uint64_t(rows_ + 1) * 2 > index_.size()) grow_index();
  const uint32_t r = allocate_row();
  key(r) = {id, clock_};
  links(r).updates = 0;
  index_add(r);
  link_back(r);
  ++rows_;
  return r;
}

// Backward-shift deletion: each later entry of the probe run moves into the
// hole when its home is not between the hole and it, so no tombstones pile
// up under churn and lookups stop at the first empty slot.
void dynamic_table::remove(uint32_t r) {
  const size_t mask = index_.size() - 1;
  size_t hole = home(key(r).id);
  while (index_[hole] != r) hole = (hole + 1) & mask;
  for (size_t j = (hole + 1) & mask; index_[j] != kNone; j = (j + 1) & mask) {
    const size_t h = home(key(index_[j]).id);
    if (((j - h) & mask) >= ((j - hole) & mask)) {
      index_[hole] = index_[j];
      hole = j;
    }
  }
  index_[hole] = kNone;
  unlink(r);
  links(r).next = free_;
  free_ = r;
  --rows_;
}

// --- rows: freed ones first, so memory stays flat under churn.

uint32_t dynamic_table::allocate_row() {
  if (free_ != kNone) {
    const uint32_t r = free_;
    free_ = links(r).next;
    return r;
  }
  if (used_ == kNone) throw std::length_error("dynamic_table: more than 2^32 - 1 rows");
  if ((used_ >> slab_shift_) == slabs_.size()) {
    const size_t n = size_t(1) << slab_shift_;
    slabs_.push_back({std::make_unique<float[]>(n * size_t(row_floats_)), std::make_unique<row_key[]>(n),
                      std::make_unique<row_links[]>(n)});
  }
  return used_++;
}

void dynamic_table::link_back(uint32_t r) {
  links(r).prev = tail_;
  links(r).next = kNone;
  if (tail_ != kNone)
    links(tail_).next = r;
  else
    head_ = r;
  tail_ = r;
}

void dynamic_table::unlink(uint32_t r) {
  const uint32_t p = links(r).prev, n = links(r).next;
  if (p != kNone)
    links(p).next = n;
  else
    head_ = n;
  if (n != kNone)
    links(n).prev = p;
  else
    tail_ = p;
}

// initialize_id_row seeds row i's generator as initialize_rows does,
// splitmix64(seed ^ splitmix64(i)), for rows of a variable of `shape`. A table
// has no such rows: each id draws row 0 of the virtual shape {2^31, dim}
// under its own seed, mix(init.seed ^ id_hash(id)). id_hash and mix are
// bijections, so distinct ids get distinct generators, two ids of one virtual
// row included, and the values depend on nothing but (init, id).
// glorot_uniform takes its fans from the virtual shape (limit
// sqrt(6 / (2^31 + dim)), about 5e-5): without a fixed vocabulary there is no
// better fan_in, and near-zero rows are a sane start for an embedding.
void dynamic_table::initial_values(int64_t id, float* out) const {
  kernels::initializer per_id = opts_.init;
  per_id.seed = kernels::pointwise::mix(opts_.init.seed ^ id_hash(id));
  kernels::initialize_id_row(per_id, {kVirtualRows, opts_.dim}, out);
}

// One sighting into the count-min sketch; true when its estimate reaches
// min_count. Conservative update (only the counters at the minimum grow):
// collisions inflate an estimate less, so fewer rare ids get rows.
bool dynamic_table::sighted_enough(int64_t id) {
  const uint64_t h = kernels::pointwise::mix(id_hash(id) + kSketchSalt), wide = kernels::pointwise::mix(h);
  const uint64_t high_mask = (uint64_t(1) << (sketch_bits_ - kSketchMinBits)) - 1;
  uint8_t* counter[kSketchDepth];
  uint8_t low = UINT8_MAX;
  for (int d = 0; d < kSketchDepth; ++d) {
    const uint64_t at = ((h >> (d * 16)) & 0xFFFF) | (((wide >> (d * 16)) & high_mask) << 16);
    counter[d] = &sketch_[(size_t(d) << sketch_bits_) + at];
    low = std::min(low, *counter[d]);
  }
  if (low < UINT8_MAX)
    for (uint8_t* c : counter)
      if (*c == low) ++*c;
  return uint32_t(low) + 1 >= opts_.min_count;
}

}  // namespace actorps
