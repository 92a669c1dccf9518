// The structure table (core/structures.h): one row per Structure, and its columns consistent with
// each other and with the semantics every op relies on (docs/semantics.md).
#include <gtest/gtest.h>

#include <iterator>
#include <string>

#include "core/structures.h"
#include <structgrad/core/types.h>

namespace {

using sg::Structure;
using sg::detail::kStructures;
using sg::detail::Pattern;
using sg::detail::Projection;
using sg::detail::traits;

constexpr Structure kAll[] = {Structure::Dense, Structure::UpperTriangular, Structure::LowerTriangular,
                              Structure::Symmetric};

TEST(StructureTable, EveryStructureHasExactlyOneRowAndItsName) {
  EXPECT_EQ(std::size(kStructures), std::size(kAll));
  for (Structure s : kAll) {
    int rows = 0;
    for (const auto& row : kStructures) rows += row.tag == s;
    EXPECT_EQ(rows, 1) << sg::structure_name(s);
    EXPECT_EQ(traits(s).tag, s);
  }
  EXPECT_STREQ(sg::structure_name(Structure::UpperTriangular), "UpperTriangular");
  EXPECT_STREQ(sg::structure_name(Structure::LowerTriangular), "LowerTriangular");
  EXPECT_STREQ(sg::structure_name(Structure::Symmetric), "Symmetric");
  EXPECT_STREQ(sg::structure_name(Structure::Dense), "Dense");
}

TEST(StructureTable, TransposeMirrorsTheStoredPartAndIsAnInvolution) {
  using namespace sg::detail;
  auto mirrored = [](uint8_t parts) {
    return static_cast<uint8_t>((parts & kOnDiagonal) | (parts & kBelowDiagonal ? kAboveDiagonal : 0) |
                                (parts & kAboveDiagonal ? kBelowDiagonal : 0));
  };
  for (Structure s : kAll) {
    const Structure t = traits(s).transpose;
    EXPECT_EQ(traits(t).transpose, s) << sg::structure_name(s);
    EXPECT_EQ(traits(t).stored, mirrored(traits(s).stored)) << sg::structure_name(s);
    EXPECT_EQ(traits(t).symmetric, traits(s).symmetric) << sg::structure_name(s);
    EXPECT_EQ(op_structure(s, false), s);
    EXPECT_EQ(op_structure(s, true), t);
    // op(B) is read as V(n, k) = op(B)ᵀ(n, k): B's pattern is the transpose's pattern as A.
    EXPECT_EQ(traits(s).as_b, traits(t).as_a) << sg::structure_name(s);
  }
  EXPECT_EQ(traits(Structure::UpperTriangular).transpose, Structure::LowerTriangular);
  EXPECT_EQ(traits(Structure::Symmetric).transpose, Structure::Symmetric);
}

TEST(StructureTable, ThePartsAPatternReadsAreTheStoredOnes) {
  // As operand A, V(m, k) = op(A)[m][k]: an entry above the diagonal has k > m.
  using namespace sg::detail;
  for (Structure s : kAll) {
    const StructureTraits& t = traits(s);
    const Pattern expected = t.symmetric                    ? Pattern::Symmetric
                             : t.stored == kWholeMatrix      ? Pattern::All
                             : (t.stored & kAboveDiagonal)   ? Pattern::KAtLeastOuter
                                                            : Pattern::KAtMostOuter;
    EXPECT_EQ(t.as_a, expected) << t.name;
    EXPECT_EQ(t.read & ~t.stored, 0) << t.name << " reads a part it does not store";
    EXPECT_EQ(is_triangular(s), t.stored != kWholeMatrix) << t.name;
  }
}

TEST(StructureTable, ProjectionsFollowTheStructure) {
  for (Structure s : kAll) {
    const auto& t = traits(s);
    const Projection expected = t.symmetric                          ? Projection::Symmetrize
                                : sg::detail::is_triangular(s)       ? Projection::KeepStored
                                                                     : Projection::Identity;
    EXPECT_EQ(t.projection, expected) << t.name;
    // The gradient of a structured leaf is its projection onto the structure (the Frobenius projection).
    EXPECT_EQ(t.gradient_projection, expected) << t.name;
  }
  EXPECT_STREQ(traits(Structure::UpperTriangular).projection_op, "triu");
  EXPECT_STREQ(traits(Structure::LowerTriangular).projection_op, "tril");
  EXPECT_STREQ(traits(Structure::Symmetric).projection_op, "sym");
}

TEST(StructureTable, ProductsKeepOnlyTheZerosBothFactorsShare) {
  // Upper·Upper → Upper and Lower·Lower → Lower; every other product of the four is Dense, Sym·Sym
  // included (S·T is symmetric only when S and T commute).
  for (Structure a : kAll)
    for (Structure b : kAll) {
      const Structure expected = a == b && sg::detail::is_triangular(a) ? a : Structure::Dense;
      EXPECT_EQ(sg::detail::product_structure(a, b), expected)
          << sg::structure_name(a) << " · " << sg::structure_name(b);
    }
}

TEST(StructureTable, NamesTakeTheirArticle) {
  EXPECT_EQ(sg::detail::with_article("UpperTriangular"), "an UpperTriangular");
  EXPECT_EQ(sg::detail::with_article("LowerTriangular"), "a LowerTriangular");
  EXPECT_EQ(sg::detail::with_article("Symmetric"), "a Symmetric");
  EXPECT_EQ(sg::detail::with_article("Dense"), "a Dense");
}

}  // namespace
