// The error hierarchy every Kiln component throws.
//
// Messages say what went wrong, where (file:line, key, rank, sample index) and what to do; the
// CLI prints what() as one line and exits non-zero. The destructors are defined out of line in
// libkiln_core, so every library sees one typeinfo per class and a plugin's exception is caught
// by the host's `catch (const kiln::ConfigError&)`.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

/// Base of all Kiln errors. Thread-safe to construct and throw.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  ~Error() override;
};

/// A config file, a --set override or a plugin parameter is wrong (unknown key, wrong type,
/// value out of range, missing table). The message carries file:line where known.
class ConfigError : public Error {
 public:
  using Error::Error;
  ~ConfigError() override;
};

/// A plugin library cannot be found, loaded or trusted (ABI, toolchain key, missing descriptor,
/// duplicate name), or its factory failed.
class PluginError : public Error {
 public:
  using Error::Error;
  ~PluginError() override;
};

/// Input data is missing, corrupt or inconsistent; names the file (and sample index) at fault.
class DataError : public Error {
 public:
  using Error::Error;
  ~DataError() override;
};

/// A collective failed, timed out, or a peer died; names the op, sequence number and ranks.
class CommError : public Error {
 public:
  using Error::Error;
  ~CommError() override;
};

/// A compute backend failed (library error, out of memory, bad shapes).
class BackendError : public Error {
 public:
  using Error::Error;
  ~BackendError() override;
};

/// A backend was asked for an op or dtype it does not implement. Thrown when a model is built
/// (Model::build checks Backend::supports), never as a silent fallback to another device.
class UnsupportedError : public BackendError {
 public:
  using BackendError::BackendError;
  ~UnsupportedError() override;
};

/// Training cannot continue numerically (loss scale fell below its floor, loss is NaN).
class NumericError : public Error {
 public:
  using Error::Error;
  ~NumericError() override;
};

/// An output (run directory, metrics, checkpoint) could not be written.
class IoError : public Error {
 public:
  using Error::Error;
  ~IoError() override;
};

}  // namespace kiln
