// `lockcached --help`: lockcached's own flags first, in groups, then
// memcached's options and a pointer to the rest (glog's and gflags' flags,
// which --helpfull lists).
#pragma once

#include <span>
#include <string>

#include "lockcached/config/flags.h"

namespace lockcached::config {

// The help text: `intro`, then each group of `flags` with each flag's
// description and default (as gflags knows them, or as the row's own help
// says, for flags that are not lockcached's, such as glog's --v), then
// `outro`. A group's flags follow one another in `flags`.
std::string usage_text(const std::string& intro, std::span<const Flag> flags,
                       const std::string& outro);

}  // namespace lockcached::config
