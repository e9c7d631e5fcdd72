// --plot curves.png: the training curves Keras users draw from their
// History, one panel per metric (loss, accuracy, mae, mean_iou), training
// and test per epoch. A root-only callback: after every epoch it redraws the
// PNG with gnuplot, so a long or killed run has its curves up to its last
// epoch; the epochs so far travel in checkpoints, so a resumed run's plot
// starts at epoch 1.
#pragma once

#include <string>
#include <vector>

#include <ddl/optim/engine/callback.hpp>

namespace ddl::apps {

// Whether gnuplot can be run (it is found on PATH): checked at start-up.
bool gnuplot_available();

class CurvePlot : public optim::Callback {
 public:
  CurvePlot(std::string path, std::string title);

  void on_epoch_end(optim::Trainer& trainer, std::int64_t epoch, const optim::Logs& logs) override;
  bool root_only() const override { return true; }
  std::string state_key() const override { return "curve_plot"; }
  void save_state(optim::Checkpoint& checkpoint, const std::string& prefix) const override;
  void load_state(const optim::Checkpoint& checkpoint, const std::string& prefix) override;

 private:
  void draw() const;

  std::string path_;
  std::string title_;
  std::vector<optim::Logs> epochs_;
};

}  // namespace ddl::apps
