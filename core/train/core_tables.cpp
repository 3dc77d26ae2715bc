// Keys, defaults and docs of the core's own config tables, and their validation in one place.
#include "kiln/train/core_tables.hpp"

#include "kiln/config/config.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/early_stop.hpp"
#include "kiln/train/lr_schedule.hpp"
#include "kiln/train/optimizer.hpp"
#include "kiln/train/weight_ema.hpp"

namespace kiln::train {
namespace {

constexpr kiln_param_spec_v1 kRun[] = {
    {"epochs", KILN_PARAM_INT, "10", nullptr, "Passes over the training split.", "1", nullptr},
    {"eval_every_epochs", KILN_PARAM_INT, "1", nullptr,
     "Evaluate [data.eval] after every N epochs, and always after the last (Keras' validation_freq); eval metrics "
     "watched by early_stop, a plateau schedule or keep_best are read at those epochs, so a patience counts "
     "evaluations.", "1", nullptr},
    {"seed", KILN_PARAM_INT, "42", nullptr, "Seed for initialisation, shuffling, augmentation and dropout.", "0", nullptr},
    {"run_dir", KILN_PARAM_STRING, "\"\"", nullptr,
     "Output directory; empty means runs/<YYYYmmdd-HHMMSS>. --run-dir overrides it."},
    {"stop_on_nonfinite_loss", KILN_PARAM_BOOL, "true", nullptr,
     "Stop with an error naming the epoch and step when the loss becomes inf or nan (no checkpoint is "
     "written for that epoch), and rather than checkpoint a weight that holds inf or nan; false trains on."},
    {"loss_check_every", KILN_PARAM_INT, "1", nullptr,
     "Optimizer steps between those checks (the last step of an epoch is always checked). Each check reads the loss "
     "back to the host, which waits for a GPU's queued work; 20-50 keeps a GPU busy, and the error then "
     "names the window of steps.", "1", nullptr},
    {"grad_bucket_mb", KILN_PARAM_FLOAT, "25.0", nullptr,
     "Gradient all-reduce bucket size in MB (buckets are reduced while backward continues).", "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
};

constexpr kiln_param_spec_v1 kLoader[] = {
    {"batch", KILN_PARAM_INT, "64", nullptr, "Samples per rank per step (global batch = batch x world size).", "1", nullptr},
    {"eval_batch", KILN_PARAM_INT, "0", nullptr, "Per-rank evaluation batch; 0 means the same as batch.", "0", nullptr},
    {"workers", KILN_PARAM_INT, "1", nullptr, "Decode threads per rank.", "1", "1024"},
    {"prefetch", KILN_PARAM_INT, "4", nullptr, "Batches decoded ahead of the trainer.", "1", "1024"},
    {"last_batch", KILN_PARAM_STRING, "\"drop\"", "drop|pad|partial",
     "Training: what to do with the samples that do not fill a global batch."},
    {"eval_last_batch", KILN_PARAM_STRING, "\"partial\"", "drop|pad|partial",
     "Evaluation: the same; partial and pad count every sample exactly once."},
    {"shuffle", KILN_PARAM_BOOL, "true", nullptr, "Reshuffle the training order every epoch."},
    {"accumulate_steps", KILN_PARAM_INT, "1", nullptr,
     "Micro-batches whose gradients are summed per optimizer step (one all-reduce per step); the effective "
     "global batch is batch x world size x accumulate_steps.", "1", "65536"},
};

constexpr kiln_param_spec_v1 kLoss[] = {
    {"label_smoothing", KILN_PARAM_FLOAT, "0.0", nullptr,
     "Softmax cross-entropy target: (1 - s) * onehot + s / classes.", "0", "1", KILN_PARAM_MAX_EXCLUSIVE},
};

constexpr kiln_param_spec_v1 kLog[] = {
    {"level", KILN_PARAM_STRING, "\"info\"", "trace|debug|info|warn|error",
     "Console log level on rank 0 (and on every rank with all_ranks); the other ranks print warnings and errors."},
    {"all_ranks", KILN_PARAM_BOOL, "false", nullptr,
     "Every rank prints its log lines on the console at `level` (each prefixed with its rank), not only rank 0; "
     "kiln train --log-all-ranks sets it."},
    {"progress", KILN_PARAM_STRING, "\"auto\"", "auto|always|never",
     "Progress display: auto redraws a line in place on a terminal and prints a plain line every "
     "progress_every_s otherwise; always redraws even when not a terminal; never shows only the epoch lines."},
    {"progress_every_s", KILN_PARAM_FLOAT, "30.0", nullptr,
     "Not on a terminal: print a progress line when nothing was printed for this many seconds (0 = after "
     "every step).", "0", nullptr},
    {"every_steps", KILN_PARAM_INT, "0", nullptr,
     "Write a \"train_step\" record (loss, accuracy, throughput, step time, data wait) to metrics.jsonl and "
     "TensorBoard every N optimizer steps; 0 = epoch records only.", "0", nullptr},
    {"histograms_every_epochs", KILN_PARAM_INT, "0", nullptr,
     "Write a TensorBoard histogram of every parameter's values (tag weights/<name>) after every N epochs, as "
     "Keras' TensorBoard(histogram_freq=N); 0 = none.", "0", nullptr},
};

constexpr kiln_param_spec_v1 kDist[] = {
    {"timeout_s", KILN_PARAM_FLOAT, "300.0", nullptr,
     "Seconds every collective and the rendezvous may take before the rank gives up and exits.", "0", "604800", KILN_PARAM_MIN_EXCLUSIVE},
    {"rendezvous", KILN_PARAM_STRING, "\"\"", nullptr,
     "Store the ranks meet through: \"tcp://<host>:<port>\" (served by rank 0 on that host), \"mpi\" "
     "(under mpirun) or \"file:<dir>\" on a path every rank sees. Empty: none for one rank, the supervisor's "
     "under --nproc, else KILN_RENDEZVOUS, else tcp from torchrun's MASTER_ADDR/MASTER_PORT or mpi under "
     "Open MPI."},
    {"fingerprint", KILN_PARAM_BOOL, "false", nullptr,
     "Debug: before every collective, compare (sequence, op, dtype, count) across ranks and stop with both "
     "sides shown when they differ, instead of hanging."},
    {"recent_collectives", KILN_PARAM_INT, "256", nullptr,
     "Collectives each rank remembers (op, size, purpose, times, state) and writes to <run_dir>/debug/rank<N>.json "
     "when it stops on an error, by SIGTERM/SIGINT or by a crash, for `kiln collectives`; 0 = none. Multi-rank runs "
     "only.",
     "0", "1048576"},
    {"warn_after_s", KILN_PARAM_FLOAT, "60.0", nullptr,
     "Seconds a rank may wait in one collective before it warns, naming the collective and how to find the "
     "rank it waits for (long before timeout_s ends the run; needs recent_collectives > 0); at the rendezvous, "
     "how often a waiting rank names the ranks it still waits for. 0 = never.",
     "0", "604800"},
};

}  // namespace

std::span<const kiln_param_spec_v1> run_schema() { return kRun; }
std::span<const kiln_param_spec_v1> loader_schema() { return kLoader; }
std::span<const kiln_param_spec_v1> loss_schema() { return kLoss; }
std::span<const kiln_param_spec_v1> log_schema() { return kLog; }
std::span<const kiln_param_spec_v1> dist_schema() { return kDist; }

CoreTables validate_core_tables(config::Config& cfg) {
  CoreTables t;
  t.run = cfg.validate("run", run_schema());
  t.loader = cfg.validate("loader", loader_schema());
  t.loss = cfg.validate("loss", loss_schema());
  t.log = cfg.validate("log", log_schema());
  t.dist = cfg.validate("dist", dist_schema());
  t.checkpoint = cfg.validate("checkpoint", checkpoint_schema());
  t.early_stop = cfg.validate("early_stop", early_stop_schema());
  t.ema = cfg.validate("ema", ema_schema());
  t.optimizer_type = cfg.plugin_type("optimizer", "adam", optimizer_types());
  t.optimizer = cfg.validate("optimizer", optimizer_schema(t.optimizer_type));
  t.schedule_type = cfg.plugin_type("schedule", "constant", schedule_types());
  cfg.drop_defaults("schedule", schedule_keys_of_other_types(t.schedule_type));
  t.schedule = cfg.validate("schedule", schedule_schema(t.schedule_type));
  return t;
}

}  // namespace kiln::train
