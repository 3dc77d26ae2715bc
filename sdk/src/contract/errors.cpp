// Key functions of the error hierarchy: defining the destructors here gives each class one
// typeinfo, in libkiln_core, shared by the host and every plugin.
#include "kiln/errors.hpp"

namespace kiln {

Error::Error(const std::string& message) : std::runtime_error(message) {}
Error::~Error() = default;
ConfigError::~ConfigError() = default;
PluginError::~PluginError() = default;
DataError::~DataError() = default;
CommError::~CommError() = default;
BackendError::~BackendError() = default;
UnsupportedError::~UnsupportedError() = default;
NumericError::~NumericError() = default;
IoError::~IoError() = default;

}  // namespace kiln
