// Callback: code the Trainer runs at fixed points of fit() (Keras'
// callbacks): checkpoints, early stopping, learning-rate schedules and
// loggers are callbacks, and so can be anything a user writes.
#pragma once

#include <cstdint>
#include <string>

#include <ddl/optim/engine/checkpoint.hpp>
#include <ddl/optim/engine/logs.hpp>

namespace ddl::optim {

class Trainer;

class Callback {
 public:
  virtual ~Callback() = default;

  // Epochs and steps are 0-based counts of those completed before the call;
  // logs of an epoch hold what History records for it.
  virtual void on_train_begin(Trainer& /*trainer*/) {}
  virtual void on_epoch_begin(Trainer& /*trainer*/, std::int64_t /*epoch*/) {}
  virtual void on_batch_begin(Trainer& /*trainer*/, std::int64_t /*step*/) {}
  virtual void on_batch_end(Trainer& /*trainer*/, std::int64_t /*step*/, const Logs& /*batch_logs*/) {}
  virtual void on_epoch_end(Trainer& /*trainer*/, std::int64_t /*epoch*/, const Logs& /*logs*/) {}
  virtual void on_train_end(Trainer& /*trainer*/) {}

  // Callbacks that write files alone (logs) run on the root rank only. A
  // callback that saves checkpoints must run on every rank, since
  // Trainer::save_checkpoint is collective (a strategy may gather state from
  // the other ranks first), and fit() refuses one that is root_only().
  virtual bool root_only() const { return false; }
  // Callbacks that save checkpoints run after all others at each epoch's end,
  // so the checkpoint holds the other callbacks' state for that epoch.
  virtual bool saves_checkpoints() const { return false; }

  // State that must survive a resume (best value so far, epochs without
  // improvement), kept in checkpoints under "callback.<state_key()>.".
  // An empty key means the callback keeps no such state.
  virtual std::string state_key() const { return {}; }
  virtual void save_state(Checkpoint& /*checkpoint*/, const std::string& /*prefix*/) const {}
  virtual void load_state(const Checkpoint& /*checkpoint*/, const std::string& /*prefix*/) {}
};

}  // namespace ddl::optim
