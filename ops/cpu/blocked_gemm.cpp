// The CPU fast path of the structured GEMM (docs/structured_gemm.md): C is cut into output tiles, tiles the
// mask makes zero are skipped, and each tile's k-range (structured_k_range) is cut at the
// operands' diagonals into segments that are each one Eigen block product on stored memory.
#include <Eigen/Dense>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <structgrad/core/error.h>
#include "ops/cpu/cpu_gemm.h"

// How the product is cut up (the CUDA kernel's descriptors, on Eigen block products):
//
//  * Tiles. C is split into output tiles, processed in parallel (OpenMP, dynamic schedule,
//    heaviest tile first; Eigen stays single-threaded inside the parallel region). When
//    op(B) is Dense its structure does not vary along the columns, so a tile is a row panel
//    (b rows × every column, or every column from the diagonal on for an Upper/Symmetric
//    mask); when only op(A) is structured, a column panel; otherwise a b×b square. Under an
//    Upper or Symmetric mask only tiles on or above the diagonal are computed: the Upper mask
//    writes zeros below the diagonal, the Symmetric mask copies each computed entry (i, j),
//    i < j, to (j, i) bit for bit.
//  * k-range. A tile's k-range is structured_k_range(...): Upper·Upper tile (bi, bj) only
//    runs over k in [row0, col1).
//  * Segments. Inside the k-range, the block of op(A) (tile rows × k) lies either strictly
//    above op(A)'s diagonal, strictly below it, or crosses it; the crossing happens exactly
//    for k in [row0, row1). Likewise op(B)'s block (k × tile columns) crosses its diagonal
//    for k in [col0, col1). Cutting the k-range at those points leaves segments in which
//    each operand block is either uniform — zero (skipped), or one strided view of the
//    stored memory, transposed where the descriptor or the symmetric lower half asks — or a
//    small crossing block, which is materialised (zero triangle filled with zeros,
//    symmetric lower half read from the upper storage) into a per-thread buffer. Every
//    segment is then one `C_tile += alpha · A_block · B_block` Eigen product.

namespace sg::detail::cpu {
namespace {

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
template <typename T>
using ConstStridedMap = Eigen::Map<const RowMat<T>, 0, Stride>;
template <typename T>
using StridedMap = Eigen::Map<RowMat<T>, 0, Stride>;

std::atomic<int64_t> last_call_macs{0};

/// Tile sizes: row panel height and column panel width, the height of the row blocks a column
/// panel is cut into, square tile side, and the granule below which a block crossing a diagonal
/// is materialised instead of split further.
struct BlockedGemmTiling {
  int64_t panel = 256, panel_rows = 256, square = 256, granule = 64;
};

/// A rows×cols block of op(X) in row-major memory: `data` holds the block itself
/// (stored_transposed = false, row length ld) or its transpose (cols×rows, row length ld).
template <typename T>
struct BlockView {
  const T* data;
  int64_t ld;
  bool stored_transposed;
  int64_t rows, cols;
};

/// Calls f with the block as an Eigen expression of shape [rows, cols].
template <typename T, typename F>
void with_expression(const BlockView<T>& v, F&& f) {
  if (v.stored_transposed) {
    ConstStridedMap<T> stored(v.data, v.cols, v.rows, Stride(v.ld));
    f(stored.transpose());
  } else {
    ConstStridedMap<T> stored(v.data, v.rows, v.cols, Stride(v.ld));
    f(stored);
  }
}

/// Where a block rows [i0, i1) × cols [j0, j1) of a matrix lies relative to its diagonal.
enum class Side { Above, Below, Crossing };  // Above: j > i for every entry; Below: j < i

Side side_of(int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  if (j0 >= i1) return Side::Above;
  if (j1 <= i0) return Side::Below;
  return Side::Crossing;
}

/// How a block of op(X) is fed to the product.
enum class Read { Zero, View, Materialise };

/// One operand, op(X), as the tiles read it.
template <typename T>
struct Operand {
  const T* data;
  int64_t ld;
  GemmOperand desc;

  bool structured() const { return desc.structure != Structure::Dense; }
  /// A crossing block of a triangular operand is part zeros: splitting it saves work. A
  /// symmetric one is all data: it is materialised whole, whatever its size.
  bool triangular() const { return desc.structure == Structure::UpperTriangular || desc.structure == Structure::LowerTriangular; }

  Read how(Side side) const {
    switch (desc.structure) {
      case Structure::Dense: return Read::View;
      case Structure::UpperTriangular:
        return side == Side::Below ? Read::Zero : side == Side::Above ? Read::View : Read::Materialise;
      case Structure::LowerTriangular:
        return side == Side::Above ? Read::Zero : side == Side::Below ? Read::View : Read::Materialise;
      case Structure::Symmetric: return side == Side::Crossing ? Read::Materialise : Read::View;
    }
    return Read::View;
  }

  /// Block [i0, i1) × [j0, j1) of the storage, or of its transpose when `transposed`.
  BlockView<T> storage_block(int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool transposed) const {
    if (transposed) return {data + j0 * ld + i0, ld, true, i1 - i0, j1 - j0};
    return {data + i0 * ld + j0, ld, false, i1 - i0, j1 - j0};
  }

  /// op(X)[i0:i1, j0:j1] for a block that lies on one side of the diagonal. A symmetric
  /// operand reads its upper storage directly above the diagonal and transposed below it.
  BlockView<T> view(Side side, int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    const bool transposed = desc.structure == Structure::Symmetric ? side == Side::Below : desc.trans;
    return storage_block(i0, i1, j0, j1, transposed);
  }

  /// Copies op(X)[i0:i1, j0:j1], a block crossing the diagonal, into `buffer`, never reading
  /// the zero triangle of an Upper/Lower operand nor the lower storage of a Symmetric one.
  /// Row ii splits at the diagonal into a left part (columns < split) and a right part,
  /// each read from one source: zeros, the stored block, or the stored block transposed.
  BlockView<T> materialise(int64_t i0, int64_t i1, int64_t j0, int64_t j1, RowMat<T>& buffer) const {
    const int64_t rows = i1 - i0, cols = j1 - j0;
    buffer.resize(rows, cols);
    struct Source {
      bool zero;
      BlockView<T> block;
    };
    const Source zeros{true, {}};
    const Source direct{false, view(Side::Above, i0, i1, j0, j1)};  // op(X) for Dense/Upper/Lower
    Source left = direct, right = direct;
    int64_t diagonal_shift = 0;  // row ii's right part starts at column ii + i0 - j0 + shift
    switch (desc.structure) {
      case Structure::Dense: break;
      case Structure::UpperTriangular: left = zeros; break;                             // j >= i kept
      case Structure::LowerTriangular: right = zeros, diagonal_shift = 1; break;        // j <= i kept
      case Structure::Symmetric:                                              // S[i][j] = s[min][max]
        left = {false, storage_block(i0, i1, j0, j1, true)};
        right = {false, storage_block(i0, i1, j0, j1, false)};
        break;
    }
    auto copy_part = [&](const Source& src, int64_t ii, int64_t jj_begin, int64_t jj_end) {
      T* out = buffer.data() + ii * cols;
      const BlockView<T>& b = src.block;
      if (src.zero) std::fill(out + jj_begin, out + jj_end, T(0));
      else if (!b.stored_transposed) std::copy(b.data + ii * b.ld + jj_begin, b.data + ii * b.ld + jj_end, out + jj_begin);
      else for (int64_t jj = jj_begin; jj < jj_end; ++jj) out[jj] = b.data[jj * b.ld + ii];
    };
    // In 32×32 blocks, so that transposed reads stay in cache.
    constexpr int64_t kBlock = 32;
    for (int64_t ii0 = 0; ii0 < rows; ii0 += kBlock) {
      const int64_t ii1 = std::min(ii0 + kBlock, rows);
      for (int64_t jj0 = 0; jj0 < cols; jj0 += kBlock) {
        const int64_t jj1 = std::min(jj0 + kBlock, cols);
        for (int64_t ii = ii0; ii < ii1; ++ii) {
          const int64_t split = std::clamp<int64_t>(ii + i0 - j0 + diagonal_shift, jj0, jj1);
          copy_part(left, ii, jj0, split);
          copy_part(right, ii, split, jj1);
        }
      }
    }
    return {buffer.data(), cols, false, rows, cols};
  }
};

/// C_tile += alpha · a · b, one Eigen GEMM (single-threaded inside the parallel region).
template <typename T>
void accumulate_product(StridedMap<T>& c_tile, T alpha, const BlockView<T>& a, const BlockView<T>& b) {
  with_expression(a, [&](const auto& a_block) {
    with_expression(b, [&](const auto& b_block) { c_tile.noalias() += alpha * (a_block * b_block); });
  });
}

/// A block of C: rows [row0, row1) × cols [col0, col1).
struct Region {
  int64_t row0, row1, col0, col1;
  int64_t rows() const { return row1 - row0; }
  int64_t cols() const { return col1 - col0; }
};

/// One unit of parallel work: a region of C and its estimated multiply-adds.
struct Tile {
  Region region;
  int64_t cost;
};

/// Per-thread scratch for materialised crossing blocks.
template <typename T>
struct Workspace {
  RowMat<T> a_block, b_block;
};

/// Where to split [begin, end) so that both halves are smaller: at `preferred` when it lies
/// strictly inside, otherwise in the middle (rounded to a multiple of 8 for the SIMD packing).
int64_t split_point(int64_t begin, int64_t end, int64_t preferred) {
  if (preferred > begin && preferred < end) return preferred;
  const int64_t half = (end - begin) / 2;
  const int64_t rounded = half >= 16 ? half / 8 * 8 : half;
  return begin + std::max<int64_t>(rounded, 1);
}

template <typename T>
class BlockedGemm {
 public:
  BlockedGemm(const GemmProblem& p, const BlockedGemmTiling& tiling)
      : p_(p),
        tiling_(tiling),
        a_{static_cast<const T*>(p.a_data), p.lda, p.a},
        b_{static_cast<const T*>(p.b_data), p.ldb, p.b},
        c_(static_cast<T*>(p.c_data)),
        alpha_(static_cast<T>(p.alpha)) {}

  void run() {
    const std::vector<Tile> tiles = plan_tiles();
    const int64_t num_tiles = static_cast<int64_t>(tiles.size());
    int64_t total_cost = 0;
    for (const Tile& t : tiles) total_cost += t.cost;
    // Small products stay on one thread (kMinParallelMacs says why).
    // A serial product enters no OpenMP region: libgomp allocates a team even for one whose `if`
    // is false.
    const bool parallel = num_tiles > 1 && total_cost >= kMinParallelMacs;
    int64_t macs = 0;
    if (!parallel) {
      Workspace<T> workspace;
      for (int64_t t = 0; t < num_tiles; ++t) macs += compute_tile(tiles[t].region, workspace);
    } else {
#pragma omp parallel reduction(+ : macs)
      {
        Workspace<T> workspace;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < num_tiles; ++t) macs += compute_tile(tiles[t].region, workspace);
      }
    }
    last_call_macs.store(macs);
  }

 private:
  /// The tiles, heaviest first. When op(B) is Dense its structure does not vary along the
  /// columns, so a tile is a full-width row panel (from the diagonal on under an Upper or
  /// Symmetric mask); when only op(B) is structured, a column panel, cut into row blocks (op(A)
  /// is Dense: the cut changes no k-range, so no product) so that a tall product has tiles
  /// enough for the threads; otherwise a square (on or above the diagonal under a mask).
  std::vector<Tile> plan_tiles() const {
    const int64_t m = p_.m, n = p_.n;
    const bool full = p_.mask == Structure::Dense;
    std::vector<Tile> tiles;
    auto add = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      const KRange kr = structured_k_range(p_, r0, r1, c0, c1);
      tiles.push_back({{r0, r1, c0, c1}, (r1 - r0) * (c1 - c0) * std::max<int64_t>(kr.end - kr.begin, 1)});
    };
    if (!b_.structured()) {
      const int64_t h = tiling_.panel;
      for (int64_t r0 = 0; r0 < m; r0 += h) add(r0, std::min(r0 + h, m), full ? 0 : r0, n);
    } else if (full && !a_.structured()) {
      const int64_t w = tiling_.panel, h = tiling_.panel_rows;
      for (int64_t c0 = 0; c0 < n; c0 += w)
        for (int64_t r0 = 0; r0 < m; r0 += h) add(r0, std::min(r0 + h, m), c0, std::min(c0 + w, n));
    } else {
      const int64_t b = tiling_.square;
      for (int64_t r0 = 0; r0 < m; r0 += b)
        for (int64_t c0 = full ? 0 : r0; c0 < n; c0 += b) add(r0, std::min(r0 + b, m), c0, std::min(c0 + b, n));
    }
    std::stable_sort(tiles.begin(), tiles.end(), [](const Tile& x, const Tile& y) { return x.cost > y.cost; });
    return tiles;
  }

  /// Computes one tile and writes its share of the mask's zeros / mirror; returns the
  /// multiply-adds issued.
  int64_t compute_tile(const Region& t, Workspace<T>& workspace) const {
    // One fill where the tile's rows are contiguous: a row-by-row setZero of x[1024, 16]·Uᵀ's
    // 64-byte rows took a third of the product.
    T* c_tile = c_ + t.row0 * p_.ldc + t.col0;
    if (t.cols() == p_.ldc) std::fill_n(c_tile, t.rows() * t.cols(), T(0));
    else for (int64_t i = 0; i < t.rows(); ++i) std::fill_n(c_tile + i * p_.ldc, t.cols(), T(0));
    const int64_t macs = accumulate_region(t, 0, p_.k, workspace);
    apply_mask(t);
    return macs;
  }

  /// C[r] += alpha · op(A)[r rows, k] · op(B)[k, r cols] over k in [k_lo, k_hi) ∩ the
  /// structurally non-zero range. Splits r where it crosses the output mask's diagonal or
  /// where an operand block crossing its diagonal is larger than the granule, so that every
  /// Eigen product is either on stored memory or on a small materialised block.
  int64_t accumulate_region(const Region& r, int64_t k_lo, int64_t k_hi, Workspace<T>& workspace) const {
    const int64_t g = tiling_.granule;
    if (p_.mask != Structure::Dense) {
      const Side side = side_of(r.row0, r.row1, r.col0, r.col1);
      if (side == Side::Below) return 0;  // written by apply_mask
      if (side == Side::Crossing && (r.rows() > g || r.cols() > g))
        return split_at_output_diagonal(r, k_lo, k_hi, workspace);
    }
    const KRange kr = structured_k_range(p_, r.row0, r.row1, r.col0, r.col1);
    const int64_t k_begin = std::max(kr.begin, k_lo), k_end = std::min(kr.end, k_hi);
    if (k_end <= k_begin) return 0;

    // Cut points: where op(A)'s row block or op(B)'s column block crosses its diagonal.
    int64_t cuts[6];
    int num_cuts = 0;
    auto add_cut = [&](int64_t x) { cuts[num_cuts++] = std::clamp(x, k_begin, k_end); };
    add_cut(k_begin);
    add_cut(k_end);
    if (a_.structured()) add_cut(r.row0), add_cut(r.row1);
    if (b_.structured()) add_cut(r.col0), add_cut(r.col1);
    // At most six points: an insertion sort (std::sort on so short a fixed array draws a false
    // out-of-bounds warning from GCC under the sanitizers), then without repeats.
    for (int i = 1; i < num_cuts; ++i)
      for (int j = i; j > 0 && cuts[j - 1] > cuts[j]; --j) std::swap(cuts[j - 1], cuts[j]);
    num_cuts = static_cast<int>(std::unique(cuts, cuts + num_cuts) - cuts);

    StridedMap<T> c_block(c_ + r.row0 * p_.ldc + r.col0, r.rows(), r.cols(), Stride(p_.ldc));
    int64_t macs = 0;
    for (int s = 0; s + 1 < num_cuts; ++s) {
      const int64_t k0 = cuts[s], k1 = cuts[s + 1];
      const Side a_side = side_of(r.row0, r.row1, k0, k1);  // op(A) block: [rows, k0:k1]
      const Side b_side = side_of(k0, k1, r.col0, r.col1);  // op(B) block: [k0:k1, cols]
      const Read a_read = a_.how(a_side), b_read = b_.how(b_side);
      if (a_read == Read::Zero || b_read == Read::Zero) continue;
      if (a_read == Read::Materialise && a_.triangular() && r.rows() > g) {
        // Rows above k0 see op(A) above its diagonal, rows from k1 on below it.
        const int64_t mid = split_point(r.row0, r.row1, k0 > r.row0 ? k0 : k1);
        macs += accumulate_region({r.row0, mid, r.col0, r.col1}, k0, k1, workspace);
        macs += accumulate_region({mid, r.row1, r.col0, r.col1}, k0, k1, workspace);
        continue;
      }
      if (b_read == Read::Materialise && b_.triangular() && r.cols() > g) {
        const int64_t mid = split_point(r.col0, r.col1, k0 > r.col0 ? k0 : k1);
        macs += accumulate_region({r.row0, r.row1, r.col0, mid}, k0, k1, workspace);
        macs += accumulate_region({r.row0, r.row1, mid, r.col1}, k0, k1, workspace);
        continue;
      }
      const BlockView<T> a_block = a_read == Read::Materialise
                                       ? a_.materialise(r.row0, r.row1, k0, k1, workspace.a_block)
                                       : a_.view(a_side, r.row0, r.row1, k0, k1);
      const BlockView<T> b_block = b_read == Read::Materialise
                                       ? b_.materialise(k0, k1, r.col0, r.col1, workspace.b_block)
                                       : b_.view(b_side, k0, k1, r.col0, r.col1);
      accumulate_product(c_block, alpha_, a_block, b_block);
      macs += r.rows() * r.cols() * (k1 - k0);
    }
    return macs;
  }

  /// A region that crosses the output diagonal under an Upper/Symmetric mask: the parts
  /// above the diagonal are computed, the parts below skipped, and the square on the
  /// diagonal halved until it is no larger than the granule.
  int64_t split_at_output_diagonal(const Region& r, int64_t k_lo, int64_t k_hi, Workspace<T>& workspace) const {
    auto both = [&](const Region& x, const Region& y) {
      return accumulate_region(x, k_lo, k_hi, workspace) + accumulate_region(y, k_lo, k_hi, workspace);
    };
    if (r.col0 < r.row0) return both({r.row0, r.row1, r.col0, r.row0}, {r.row0, r.row1, r.row0, r.col1});
    if (r.col1 > r.row1) return both({r.row0, r.row1, r.col0, r.row1}, {r.row0, r.row1, r.row1, r.col1});
    if (r.row0 < r.col0) return both({r.row0, r.col0, r.col0, r.col1}, {r.col0, r.row1, r.col0, r.col1});
    if (r.row1 > r.col1) return both({r.row0, r.col1, r.col0, r.col1}, {r.col1, r.row1, r.col0, r.col1});
    // The square [d0, d1)² on the diagonal: upper-left, upper-right and lower-right quarters.
    const int64_t d0 = r.row0, d1 = r.row1, mid = split_point(d0, d1, d0);
    return accumulate_region({d0, mid, d0, mid}, k_lo, k_hi, workspace) +
           accumulate_region({d0, mid, mid, d1}, k_lo, k_hi, workspace) +
           accumulate_region({mid, d1, mid, d1}, k_lo, k_hi, workspace);
  }

  /// Upper mask: the tile that starts on the diagonal zeroes its rows left of the diagonal.
  /// Symmetric mask: every entry of the tile above the diagonal is copied to its mirror.
  void apply_mask(const Region& t) const {
    const int64_t ldc = p_.ldc;
    if (p_.mask == Structure::UpperTriangular && t.col0 == t.row0) {
      for (int64_t i = t.row0; i < t.row1; ++i) std::fill(c_ + i * ldc, c_ + i * ldc + std::min(i, p_.n), T(0));
    } else if (p_.mask == Structure::Symmetric) {
      // In 32×32 blocks, so that the column-wise writes stay in cache.
      constexpr int64_t kBlock = 32;
      for (int64_t i0 = t.row0; i0 < t.row1; i0 += kBlock) {
        const int64_t i1 = std::min(i0 + kBlock, t.row1);
        for (int64_t j0 = std::max(t.col0, i0); j0 < t.col1; j0 += kBlock) {
          const int64_t j1 = std::min(j0 + kBlock, t.col1);
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = std::max(j0, i + 1); j < j1; ++j) c_[j * ldc + i] = c_[i * ldc + j];
        }
      }
    }
  }

  const GemmProblem& p_;
  BlockedGemmTiling tiling_;
  Operand<T> a_, b_;
  T* c_;
  T alpha_;
};

/// Tile sizes set through the environment (SG_GEMM_PANEL, SG_GEMM_PANEL_ROWS, SG_GEMM_SQUARE,
/// SG_GEMM_GRANULE; for tuning runs), read once: 0 where unset.
struct TilingOverrides {
  int64_t panel, panel_rows, square, granule;
};

const TilingOverrides& tiling_overrides() {
  static const TilingOverrides overrides = [] {
    auto env = [](const char* name) {
      const char* v = std::getenv(name);
      return v ? std::max<int64_t>(std::atoll(v), 0) : int64_t{0};
    };
    return TilingOverrides{env("SG_GEMM_PANEL"), env("SG_GEMM_PANEL_ROWS"), env("SG_GEMM_SQUARE"),
                           env("SG_GEMM_GRANULE")};
  }();
  return overrides;
}

/// Tile sizes for a problem (measured on a 2-core AVX2 machine; docs/structured_gemm.md, "The CPU side").
BlockedGemmTiling default_tiling(const GemmProblem& p) {
  const TilingOverrides& o = tiling_overrides();
  auto pick = [](int64_t override_value, int64_t fallback) { return override_value > 0 ? override_value : fallback; };
  BlockedGemmTiling t;
  const int64_t size = std::max(p.m, p.n);
  t.panel = pick(o.panel, std::max<int64_t>(64, size / 8));
  // x[1024, 256]·Uᵀ in two full-height column panels of unequal k-ranges kept one thread on two
  // thirds of the work: 0.52 ms on two threads, 0.37 ms in 256-row blocks (0.41 ms in 128-row
  // blocks, 0.52 ms in 64-row ones: each block repacks its panel of B). A product small enough
  // for one thread keeps whole panels: one materialised block of B and one Eigen call.
  const bool one_thread = p.m * p.n * p.k < kMinParallelMacs;
  t.panel_rows = pick(o.panel_rows, one_thread ? p.m : std::max<int64_t>(128, p.m / 4));
  t.square = pick(o.square, std::max<int64_t>(64, size / 4));
  t.granule = pick(o.granule, 64);
  return t;
}

}  // namespace

void blocked_gemm(const GemmProblem& p, DType dtype) {
  SG_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0, "blocked_gemm: negative sizes m=", p.m, " n=", p.n, " k=", p.k);
  SG_CHECK(!p.accumulate, "blocked_gemm: accumulate is for Dense·Dense products only");
  SG_CHECK(is_output_mask(p.mask), "blocked_gemm: no kernel writes ", with_article(structure_name(p.mask)),
           " output (a LowerTriangular one is computed transposed)");
  if (p.mask != Structure::Dense)
    SG_CHECK(p.m == p.n, "blocked_gemm: an Upper/Symmetric output mask needs a square result, got ", p.m, "x", p.n);
  if (p.a.structure == Structure::Symmetric) SG_CHECK(p.m == p.k, "blocked_gemm: symmetric A must be square");
  if (p.b.structure == Structure::Symmetric) SG_CHECK(p.k == p.n, "blocked_gemm: symmetric B must be square");
  if (p.m == 0 || p.n == 0) {
    last_call_macs.store(0);
    return;
  }
  const BlockedGemmTiling tiling = default_tiling(p);
  if (dtype == DType::Float32) BlockedGemm<float>(p, tiling).run();
  else BlockedGemm<double>(p, tiling).run();
}

int64_t blocked_gemm_last_macs() { return last_call_macs.load(); }

}  // namespace sg::detail::cpu
