// Prints the Keras-style summary of every bundled architecture
// (models::model_names()), the text docs/MODELS.md holds.
#include <ddl/ddl.hpp>
#include <ddl/layers/summary.hpp>
#include <ddl/models/data/stress_strain.hpp>
#include <ddl/models/zoo.hpp>

#include <cstdio>

int main() {
  for (const std::string& name : ddl::models::model_names()) {
    // materials_mlp reads stress-strain curves, the context nets ddl-train's 64x64
    // shapes; the others 28x28 grey images.
    const ddl::Shape sample = name == "materials_mlp" ? ddl::Shape{ddl::models::kStressStrainPoints, 3}
                              : name.ends_with("context_net") ? ddl::Shape{1, 64, 64}
                                                      : ddl::Shape{1, 28, 28};
    std::printf("%s\n%s\n", name.c_str(), ddl::layers::summary(*ddl::models::make_model(name), sample).c_str());
  }
  return 0;
}
