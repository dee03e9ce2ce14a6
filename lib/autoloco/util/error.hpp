// Typed errors. Every message names the file, key or rank at fault and says what to do;
// apps catch once, print "[rank r] error: ..." and abort the whole job.
#pragma once

#include <stdexcept>
#include <string>

namespace autoloco {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ConfigError : public Error {
 public:
  using Error::Error;
};

class DataError : public Error {
 public:
  using Error::Error;
};

class CheckpointError : public Error {
 public:
  using Error::Error;
};

// A checkpoint that is intact but cannot continue this run (other model, topology, format or
// config): resuming stops instead of falling back to an older checkpoint.
class ResumeMismatch : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

class CommError : public Error {
 public:
  using Error::Error;
};

// Training went wrong in a way no retry fixes (a pseudo-gradient that is not finite).
class TrainingError : public Error {
 public:
  using Error::Error;
};

}  // namespace autoloco
