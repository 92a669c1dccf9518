// Module::state_dict / load_state_dict: the parameters as named tensors, and loading them back
// in place. Loading checks everything first (names, shapes, dtypes, structure invariants) and
// writes only when all of it holds, so a failed load leaves the module as it was.
#include <map>
#include <set>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/nn/module.h>

namespace sg::nn {

std::vector<std::pair<std::string, Tensor>> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, p] : named_parameters()) out.emplace_back(name, p.detach());
  return out;
}

namespace {

/// Throws unless `value` (already of the parameter's shape) satisfies the structure of `param`.
void check_structure(const std::string& name, const Tensor& param, const Tensor& value) {
  const Structure s = param.structure();
  if (s == Structure::Dense || value.structure() == s) return;
  NoGradGuard guard;
  try {
    if (s == Structure::UpperTriangular) as_upper(value.detach().dense());
    if (s == Structure::LowerTriangular) as_lower(value.detach().dense());
    if (s == Structure::Symmetric) as_symmetric(value.detach().dense());
  } catch (const Error& e) {
    SG_FAIL("load_state_dict: parameter '", name, "' is ", structure_name(s), " but the incoming values are not (",
            e.what(), ")");
  }
}

}  // namespace

void Module::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  const auto params = named_parameters();
  std::map<std::string, Tensor> incoming;
  for (const auto& [name, t] : state) {
    SG_CHECK(t.defined(), "load_state_dict: tensor '", name, "' is undefined");
    SG_CHECK(incoming.emplace(name, t).second, "load_state_dict: the name '", name, "' appears twice");
  }
  std::set<std::string> expected;
  std::string missing;
  for (const auto& [name, p] : params) {
    expected.insert(name);
    if (!incoming.count(name)) missing += (missing.empty() ? "'" : ", '") + name + "'";
  }
  std::string unexpected;
  for (const auto& [name, t] : state)
    if (!expected.count(name)) unexpected += (unexpected.empty() ? "'" : ", '") + name + "'";
  SG_CHECK(missing.empty() && unexpected.empty(), "load_state_dict: the names do not match the module's parameters",
           missing.empty() ? "" : "; missing: ", missing, unexpected.empty() ? "" : "; unexpected: ", unexpected);

  for (const auto& [name, p] : params) {
    const Tensor& value = incoming.at(name);
    SG_CHECK(value.shape() == p.shape(), "load_state_dict: parameter '", name, "' has shape ", p.shape(),
             " but the state dict holds ", value.shape());
    SG_CHECK(value.dtype() == p.dtype(), "load_state_dict: parameter '", name, "' is ", p.dtype(),
             " but the state dict holds ", value.dtype(), "; convert the module with to(sg::k",
             value.dtype() == DType::Float64 ? "Float64" : "Float32", ") or load with that dtype");
    check_structure(name, p, value);
  }

  NoGradGuard guard;
  for (auto& [name, p] : params) {
    Tensor param = p;
    param.copy_(incoming.at(name).detach().to(p.device()));
  }
}

}  // namespace sg::nn
