// docs/api.md, "Files and checkpoints": .npy/.npz tensors that NumPy reads, module and optimizer
// state, and whole training checkpoints. Built and run by CTest; the guide shows the body of main()
// before its checks.
#include <structgrad/structgrad.h>

#include <filesystem>
#include <iostream>
#include <string>

int main() {
  const std::string dir = (std::filesystem::temp_directory_path() / "structgrad_api_io").string();
  std::filesystem::create_directories(dir);

  auto U = sg::UpperTriangular::randn(8);
  sg::save_npy(dir + "/U.npy", U);                            // numpy.load("U.npy") reads it
  auto loaded = sg::as_upper(sg::load_npy(dir + "/U.npy"));   // files keep values, not the structure tag

  sg::save_npz(dir + "/data.npz", {{"x", sg::randn({4, 8})}, {"U", U}});           // stored, as np.savez
  sg::save_npz(dir + "/small.npz", {{"U", U}}, sg::NpzCompression::Deflated);  // as np.savez_compressed
  for (const auto& [name, t] : sg::load_npz(dir + "/data.npz"))  // archive order
    std::cout << name << " " << sg::shape_str(t.shape()) << "\n";

  sg::nn::UpperLinear model(8);
  sg::optim::Adam opt(model.parameters(), {.lr = 0.01});
  sg::nn::save(model, dir + "/model.npz");                    // model.state_dict() as .npz
  sg::nn::load(model, dir + "/model.npz");                    // names, shapes and dtypes checked
  sg::save_checkpoint(dir + "/ckpt.npz", model, opt);         // both in one file
  sg::load_checkpoint(dir + "/ckpt.npz", model, opt);         // training resumes bit-identically

  std::filesystem::remove_all(dir);

  SG_CHECK(sg::sum(sg::square(loaded - U)).item() == 0.0, "round trip");
}
