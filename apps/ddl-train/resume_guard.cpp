// Refusing a resume that would not be exact (see resume_guard.hpp).
#include "resume_guard.hpp"

#include <fmt/format.h>

#include <ddl/optim/engine/checkpoint.hpp>
#include <ddl/optim/engine/trainer.hpp>

#include "options.hpp"

namespace ddl::apps {

ResumeGuard::ResumeGuard(std::vector<std::pair<std::string, std::string>> settings, bool allow_changes)
    : settings_(std::move(settings)), allow_changes_(allow_changes) {}

void ResumeGuard::save_state(optim::Checkpoint& checkpoint, const std::string& prefix) const {
  for (const auto& [name, value] : settings_) checkpoint.strings[prefix + name] = value;
}

void ResumeGuard::load_state(const optim::Checkpoint& checkpoint, const std::string& prefix) {
  std::vector<std::string> changes;
  for (const auto& [name, value] : settings_) {
    const auto saved = checkpoint.strings.find(prefix + name);
    if (saved != checkpoint.strings.end() && saved->second != value) {
      changes.push_back(fmt::format("{} was {}, now {}", name, saved->second, value));
    }
  }
  if (changes.empty()) return;
  const std::string list = fmt::format("{}", fmt::join(changes, "; "));
  if (!allow_changes_) {
    throw UsageError(
        fmt::format("--resume: the checkpoint was written by a run with other settings ({}), so "
                    "resuming would not continue it bit for bit; pass the same options, or "
                    "--resume-changed to resume anyway",
                    list));
  }
  notice_ = fmt::format(
      "Resuming with changed settings ({}): training goes on, no longer bit for bit as the "
      "first run would have",
      list);
}

void ResumeGuard::on_train_begin(optim::Trainer& trainer) {
  if (!notice_.empty()) trainer.print(notice_);
}

}  // namespace ddl::apps
