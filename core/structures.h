// The structure table: the one place that says what each Structure is. Names in messages, the
// product rule, transposition, the projections of triu, tril, sym and of gradients, how the GEMM
// reads an operand, gradcheck's directions and the structure checks read it from kStructures;
// adding a structure is one entry here plus its kernels (docs/architecture.md, "Adding a
// structure"). The semantics behind the columns: docs/semantics.md.
#pragma once

#include <cstdint>
#include <string>

#include <structgrad/core/types.h>

namespace sg::detail {

/// Parts of a square matrix around its diagonal, combined as bits: a structure's stored part.
enum MatrixPart : uint8_t { kBelowDiagonal = 1, kOnDiagonal = 2, kAboveDiagonal = 4, kWholeMatrix = 7 };

/// How x is projected onto a structure (the orthogonal projection in the Frobenius inner product).
enum class Projection : uint8_t {
  Identity,     ///< x
  KeepStored,   ///< x with the entries outside the stored part set to exact zeros (triu, tril)
  Symmetrize,   ///< (x + xᵀ)/2, mirrored bit for bit
};

/// How the structured GEMM reads op(X) as an operand V(outer, k) (outer: the row of A, the column of
/// B; cuda/gemm/kernel_args.h): every entry, only where k >= outer or k <= outer (zero elsewhere), or
/// from one triangle of a symmetric matrix.
enum class Pattern : int32_t { All, KAtLeastOuter, KAtMostOuter, Symmetric };

/// One row of the table. Every structured tensor is square in its trailing two dimensions and
/// stores the full matrix; `stored` says which entries may be non-zero, the others hold exact zeros.
struct StructureTraits {
  Structure tag;
  const char* name;
  uint8_t stored;                   ///< MatrixPart bits that may be non-zero
  uint8_t read;                     ///< the parts the kernels read (a Symmetric matrix: its upper triangle;
                                    ///< the GEMM patterns encode it for the kernels)
  bool symmetric;                   ///< x[i][j] == x[j][i] bit for bit, a mirror the ops must keep (a structure
                                    ///< whose zeros make it symmetric, as a diagonal one, need not say so)
  Projection projection;            ///< onto the structure
  Projection gradient_projection;   ///< of a gradient of a tensor of this structure
  const char* projection_op;        ///< the differentiable op that projects onto it (sg::triu, ...)
  Structure transpose;              ///< the structure of xᵀ
  Pattern as_a, as_b;               ///< the GEMM's reading of op(X) = X as operand A and as operand B
};

// clang-format off
inline constexpr StructureTraits kStructures[] = {
//  tag                         name               stored                         read                           sym    projection              gradient_projection     op       transpose                   as A                    as B
  {Structure::Dense,           "Dense",           kWholeMatrix,                  kWholeMatrix,                  false, Projection::Identity,   Projection::Identity,   "dense", Structure::Dense,           Pattern::All,           Pattern::All},
  {Structure::UpperTriangular, "UpperTriangular", kOnDiagonal | kAboveDiagonal,  kOnDiagonal | kAboveDiagonal,  false, Projection::KeepStored, Projection::KeepStored, "triu",  Structure::LowerTriangular, Pattern::KAtLeastOuter, Pattern::KAtMostOuter},
  {Structure::LowerTriangular, "LowerTriangular", kBelowDiagonal | kOnDiagonal,  kBelowDiagonal | kOnDiagonal,  false, Projection::KeepStored, Projection::KeepStored, "tril",  Structure::UpperTriangular, Pattern::KAtMostOuter,  Pattern::KAtLeastOuter},
  {Structure::Symmetric,       "Symmetric",       kWholeMatrix,                  kOnDiagonal | kAboveDiagonal,  true,  Projection::Symmetrize, Projection::Symmetrize, "sym",   Structure::Symmetric,       Pattern::Symmetric,     Pattern::Symmetric},
};
// clang-format on

/// The table's row of `s`. Example: `traits(Structure::UpperTriangular).transpose`.
constexpr const StructureTraits& traits(Structure s) {
  for (const StructureTraits& row : kStructures)
    if (row.tag == s) return row;
  return kStructures[0];  // (unreachable: every Structure has a row, which the test of the table checks)
}

/// Whether `s` has exact zeros outside its stored part: UpperTriangular, LowerTriangular.
constexpr bool is_triangular(Structure s) { return traits(s).stored != kWholeMatrix; }

/// The structure of a product a·b, for any two structures: its zeros are the parts where both factors
/// are zero (Upper·Upper is zero below the diagonal; Upper·Lower nowhere), and symmetry is never kept
/// (S·T is symmetric only when S and T commute). The table's non-symmetric row with exactly those
/// zeros, or Dense.
constexpr Structure product_structure(Structure a, Structure b) {
  const uint8_t zeros = static_cast<uint8_t>(~traits(a).stored & ~traits(b).stored & kWholeMatrix);
  for (const StructureTraits& row : kStructures)
    if (!row.symmetric && row.stored == (kWholeMatrix & ~zeros)) return row.tag;
  return Structure::Dense;
}

/// The structure of op(x) for x of structure `s`: xᵀ's where `trans`.
constexpr Structure op_structure(Structure s, bool trans) { return trans ? traits(s).transpose : s; }

/// The name after its article, for messages: "a Dense", "an UpperTriangular".
inline std::string with_article(const char* name) {
  const char first = name[0];
  const bool vowel = first == 'A' || first == 'E' || first == 'I' || first == 'O' || first == 'U';
  return std::string(vowel ? "an " : "a ") + name;
}

}  // namespace sg::detail
