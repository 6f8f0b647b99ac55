// Output paths: a command never replaces a file it did not make. Before any work, every output path a command will
// write is checked: a missing file is fine (its folder must exist); an existing file is replaced only when it is
// this command's own kind of output (a previous run of the same command), and otherwise refused with one line
// naming what the file is, unless the user passes --force. A directory, a dangling symlink or a missing parent
// folder are refused the same way (exit 2, never an abort).
#pragma once
#include <string>

namespace pg {

// What an existing file is, by its content: the `format` attribute of an HDF5 file's root ("pagegram-checkpoint",
// "pagegram-runlog", "pagegram-collisions", ...; "hdf5" without one), "pagegram-table" (a .pgt file, magic
// PGNF4TBL), "pagegram-token-store" (PGTOKENS), "pagegram-slurm-script" (`sweep slurm`'s job script), the "format"
// field of a JSON object ("pagegram-run-record", "pagegram-sweep"), else "file". "" when the path does not exist.
std::string file_kind(const std::string& path);

// A kind of file_kind() for a message: "a file", "an HDF5 file without a pagegram format",
// "a pagegram-checkpoint file".
std::string kind_phrase(const std::string& kind);

// Refuses (UserError) writing `path` unless it is absent or of kind `own`; `force` allows any existing regular
// file. `option` names the CLI option or config key the path came from (for the message).
void check_output_path(const std::string& path, const std::string& own, bool force, const std::string& option);

}  // namespace pg
