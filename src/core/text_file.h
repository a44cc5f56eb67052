// Reading a whole file a user named (a prompt, template, grammar, schema, messages) into memory, with the
// errors a user can act on: a missing path and a directory are told apart from an unreadable file.
#pragma once

#include <string>

#include "core/status.h"

namespace minfer {

// The bytes of `path`: kNotFound "'PATH': no such file", kInvalidArgument "'PATH': not a regular file" (a
// directory), kIo "cannot read 'PATH'". Never throws, whatever PATH is.
Result<std::string> read_regular_file(const std::string& path);

}  // namespace minfer
