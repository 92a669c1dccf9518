// docs/api.md, "Structured matrices": UpperTriangular and Symmetric, entering and leaving a
// structure, and the rules that keep it. Built and run by CTest; the guide shows it verbatim.
#include <structgrad/structgrad.h>

#include <iostream>

int main() {
  auto U = sg::UpperTriangular::randn(64);                    // triu of a standard-normal matrix
  auto S = sg::Symmetric::randn(64);                          // mirrored bit for bit
  auto zero = sg::UpperTriangular::zeros(64);
  auto identity = sg::Symmetric::eye(64);                     // also UpperTriangular::eye
  auto W = sg::randn({64, 64});

  sg::UpperTriangular T = sg::triu(W);                        // differentiable projection: grad = triu(G)
  sg::Symmetric M = sg::sym(W);                               // (W + Wᵀ)/2: grad = (G + Gᵀ)/2
  sg::UpperTriangular checked = sg::as_upper(T.dense());      // checks the zeros, throws sg::Error if not
  sg::Symmetric checked_sym = sg::as_symmetric(M.dense());    // checks the mirror bit for bit
  sg::Tensor plain = U.dense();                               // forgets the structure (same values)

  // The structure rules (docs/gradients.md has the full table).
  sg::UpperTriangular UU = sg::matmul(U, U);                  // Upper·Upper stays Upper, statically
  sg::Tensor SS = sg::matmul(S, S);                           // Dense: S·T is symmetric only if they commute
  sg::UpperTriangular scaled = 2.0 * U - U;                   // zero-preserving ops keep Upper
  sg::Tensor shifted = U + 1.0;                               // x + c fills the zeros: Dense
  sg::Symmetric smooth(sg::tanh(S));                          // every unary op keeps Symmetric
  sg::LowerTriangular Ut(sg::transpose(U));                   // Uᵀ is LowerTriangular, and Lᵀ Upper

  try {
    sg::as_upper(W);                                          // W has entries below the diagonal
  } catch (const sg::Error& e) {
    std::cout << e.what() << "\n";                            // names the first offending entry
  }

  SG_CHECK(UU.structure() == sg::Structure::UpperTriangular && SS.structure() == sg::Structure::Dense, "rules");
  SG_CHECK(shifted.structure() == sg::Structure::Dense && Ut.structure() == sg::Structure::LowerTriangular, "rules");
  SG_CHECK(plain.structure() == sg::Structure::Dense && scaled.n() == 64 && smooth.n() == 64, "rules");
  SG_CHECK(checked.n() + checked_sym.n() + zero.n() + identity.n() == 256, "rules");
}
