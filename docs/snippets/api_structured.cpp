// docs/api.md, "Structured matrices": UpperTriangular and Symmetric, entering and leaving a
// structure, the rules that keep it, and the structure of broadcast operands. Built and run by
// CTest; the guide shows the body of main() before its checks.
#include <structgrad/structgrad.h>

#include <iostream>

int main() {
  auto U = sg::UpperTriangular::randn(64);                    // triu of a standard-normal matrix
  auto S = sg::Symmetric::randn(64);                          // mirrored bit for bit
  auto W = sg::randn({64, 64});

  sg::UpperTriangular T = sg::triu(W);                        // differentiable projection: grad = triu(G)
  try {
    sg::as_upper(W);                                          // W has entries below the diagonal
  } catch (const sg::Error& e) {
    std::cout << e.what() << "\n";                            // names the first offending entry
  }

  sg::UpperTriangular UU = sg::matmul(U, U);                  // Upper·Upper stays Upper, statically
  sg::Tensor SS = sg::matmul(S, S);                           // Dense: S·T is symmetric only if they commute
  sg::UpperTriangular scaled = sg::exp(sg::randn({64})) * U - U;  // a row, column or scalar factor keeps Upper
  sg::Tensor shifted = U + 1.0;                               // x + c fills the zeros: Dense
  sg::LowerTriangular Ut(sg::transpose(U));                   // Uᵀ is LowerTriangular, and Lᵀ Upper

  SG_CHECK(SS.structure() == sg::Structure::Dense && shifted.structure() == sg::Structure::Dense, "rules");
  SG_CHECK(sg::mul(U, sg::randn({3, 64, 64})).structure() == sg::Structure::UpperTriangular, "rules");
  SG_CHECK(UU.n() + scaled.n() + Ut.n() + sg::as_upper(T.dense()).n() + S.n() == 5 * 64, "rules");
}
