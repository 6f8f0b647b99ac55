// Compact run records (committed to the repo; a sweep resumes from them on any machine).
#pragma once
#include <string>
#include <vector>

#include "sweep/spec.h"
#include "sweep/status.h"

namespace pg {

// <directory of the sweep file>/records/<name>-<hash>.json: the run's identity (sweep, name, variant, seed,
// grid point, config hash, full resolved config), provenance (revision, kernels, cpu, host, compiler flags,
// threads), status, the held-out curve, the training loss of every logged step, the last value of every
// logged scalar, throughput and wall time. Format: experiments/RECORDS.md.
std::string record_path(const SweepSpec& spec, const SweepRun& run);
bool record_exists(const SweepSpec& spec, const SweepRun& run);
// The record of a finished (or diverged) run directory, as JSON text; IoError when the log is missing or unfinished.
std::string run_record_json(const SweepSpec& spec, const SweepRun& run);
// Writes the record atomically; returns its path.
std::string write_run_record(const SweepSpec& spec, const SweepRun& run);

// The status a committed record gives a run that has no (finished) run directory here: finished or diverged, its
// steps, final held-out loss and training time, and a note naming the record's revision. IoError when unreadable.
RunStatus recorded_status(const SweepSpec& spec, const SweepRun& run);

// The corpus build a finished run trained on (its log's or record's "data": data::dataset_fingerprint); empty when
// the run has neither or they predate the field (2026-12-02). IoError when the record is unreadable.
std::string run_data_fingerprint(const SweepSpec& spec, const SweepRun& run);

// <directory of the sweep file>/records/expansion.json: the sweep's expansion as this build computes it (every run's
// name, variant, seed, grid point, overrides, config hash and resolved config) with the texts of the sweep file and of
// every preset of its base chain it was computed from. The run identity has one implementation, sweep/spec.cpp:
// experiments/report.py reads it from this file (and refuses one whose inputs changed since). Written by
// `sweep expand`, `sweep record` and `sweep run` (committed with --commit); format: experiments/RECORDS.md.
std::string expansion_path(const SweepSpec& spec);
std::string sweep_expansion_json(const SweepSpec& spec, const std::vector<SweepRun>& runs);
// Writes the expansion file atomically; returns its path.
std::string write_sweep_expansion(const SweepSpec& spec, const std::vector<SweepRun>& runs);

// Writes the record of every finished or diverged run of `runs` (`pagegram sweep record`); returns their paths.
std::vector<std::string> write_sweep_records(const SweepSpec& spec, const std::vector<SweepRun>& runs);

}  // namespace pg
