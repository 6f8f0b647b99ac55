// Storage and flash tools (issue 5): registered here as they are built.
#include "cli/commands.h"

namespace pg::cli {
void register_storage_commands(CLI::App&) {}
}  // namespace pg::cli
