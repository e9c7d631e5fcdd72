// ddl-train's promise that --resume continues bit for bit: the settings that
// decide the steps (the global batch size, the accumulation, the seed, the
// training data, the ranks that share each batch) are kept in every checkpoint, and a resume under other
// values is refused naming each change, unless --resume-changed allows it,
// which one line then reports.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ddl/optim/engine/callback.hpp>

namespace ddl::apps {

class ResumeGuard : public optim::Callback {
 public:
  // `settings`: ("--batch-size", "128") and the like, as this run has them.
  ResumeGuard(std::vector<std::pair<std::string, std::string>> settings, bool allow_changes);

  std::string state_key() const override { return "ddl_train"; }
  void save_state(optim::Checkpoint& checkpoint, const std::string& prefix) const override;
  // Throws UsageError when a setting changed and changes are not allowed.
  // A checkpoint without these entries (written by a library user) is not
  // checked.
  void load_state(const optim::Checkpoint& checkpoint, const std::string& prefix) override;
  void on_train_begin(optim::Trainer& trainer) override;

 private:
  std::vector<std::pair<std::string, std::string>> settings_;
  bool allow_changes_;
  std::string notice_;  // printed when training begins
};

}  // namespace ddl::apps
