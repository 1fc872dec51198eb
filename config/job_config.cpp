#include "config/job_config.hpp"

#include "config/dataset_config.hpp"
#include "config/model_config.hpp"
#include "config/toml_reader.hpp"
#include "config/training_config.hpp"

namespace actorps {

pb::Optimizer default_optimizer() {
  pb::Optimizer o;
  o.set_kind(pb::Optimizer::SGD);
  o.set_learning_rate(0.01f);
  o.set_momentum(0.9f);
  o.set_staleness_rule(pb::Optimizer::SCALE_LR);  // config/README.md: why
  o.set_staleness_power(0.5f);
  return o;
}

std::vector<std::vector<float>> initial_values(const job_spec& job, const kernels::graph_model& model) {
  return job.initial_values.empty() ? model.initial_values(job.training.seed) : job.initial_values;
}

caf::expected<std::optional<job_spec>> load_job_file(const std::string& path, std::string_view tf_config,
                                                     cluster_use use) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_job_toml(*text, path, tf_config, use);
}

namespace {

// The job's cluster: its [cluster], or TF_CONFIG's when it has none.
caf::expected<cluster_spec> cluster_of_job(const toml::table& doc, std::string_view text, const std::string& path,
                                           std::string_view tf_config, cluster_use use) {
  if (tf_config.empty()) {
    if (doc.get("cluster") == nullptr && use == cluster_use::optional) return with_toml_settings({}, text, path);
    if (doc.get("cluster") == nullptr)
      return make_error(errc::invalid_config,
                        path + ": missing [cluster] table with [[cluster.nodes]] (or set TF_CONFIG's cluster)");
    return parse_toml(text, path);
  }
  if (doc.get("cluster") != nullptr)
    return make_error(errc::invalid_config, path + ": both its [cluster] and TF_CONFIG give the cluster: keep one");
  auto nodes = parse_tf_config(tf_config);
  if (!nodes) return nodes.error();
  return with_toml_settings(std::move(*nodes), text, path);
}

// The examples of the largest batch `spec` makes (1 without a batch op).
int64_t batch_size(const pb::DatasetSpec& spec) {
  int64_t most = 1;
  for (auto& op : spec.ops())
    if (op.has_batch()) most = std::max<int64_t>(most, op.batch().size());
  return most;
}

// A dynamic table's copy on a worker holds the rows of one batch's ids:
// as many as the largest batch (training or evaluation) holds ids of its
// input. cache_steps under consistency sync is refused.
caf::error size_dynamic_tables(job_spec& job, const std::string& path) {
  const int64_t batch = std::max(batch_size(job.train), batch_size(job.eval));
  bool any = false;
  for (auto& l : job.model.layers) {
    if (!l.dynamic) continue;
    any = true;
    for (auto& in : job.model.inputs)
      if (in.name == l.inputs.at(0)) l.vocabulary = batch * in.shape.at(0);
  }
  if (!any) return caf::none;
  for (auto& l : job.model.layers)
    if (l.rules.cache_steps > 0 && job.training.consistency.mode() == pb::Consistency::SYNC)
      return make_error(errc::invalid_config, path + ": layer '" + l.name +
                                                  "': cache_steps under consistency \"sync\" (a SYNC step reads "
                                                  "the values of its step: no cache)");
  return caf::none;
}

}  // namespace

caf::expected<std::optional<job_spec>> parse_job_toml(std::string_view text, const std::string& path,
                                                      std::string_view tf_config, cluster_use use) {
  auto doc = parse_document(text, path);
  if (!doc) return doc.error();
  auto* node = doc->get("training");
  if (node == nullptr) return std::optional<job_spec>{};
  if (!node->is_table()) return make_error(errc::invalid_config, path + ": [training] must be a table");
  job_spec job;
  auto cluster = cluster_of_job(*doc, text, path, tf_config, use);
  if (!cluster) return cluster.error();
  job.cluster = std::move(*cluster);
  auto model = parse_model_section(text, path);
  if (!model) return model.error();
  job.model = std::move(model->spec);
  job.initial_values = std::move(model->initial_values);
  // Either dataset may be left out: without [dataset] a job trains only on
  // datasets its coordinator creates (Python's custom loops; train::fit
  // refuses it), without [eval_dataset] it evaluates nothing.
  for (auto [table, spec] : {std::pair{"dataset", &job.train}, std::pair{"eval_dataset", &job.eval}}) {
    if (doc->get(table) == nullptr) continue;
    auto parsed = parse_dataset_toml(text, path, table);
    if (!parsed) return parsed.error();
    *spec = std::move(*parsed);
  }
  if (auto err = parse_training_toml(text, path, job)) return err;
  if (auto err = size_dynamic_tables(job, path)) return err;
  // Without a cluster (cluster_use::optional), what depends on it is left unchecked.
  if (job.cluster.nodes.empty()) return std::optional<job_spec>{std::move(job)};
  auto faults = parse_faults(text, path, job.cluster);
  if (!faults) return faults.error();
  job.faults = std::move(*faults);
  if (job.cluster.count(pb::WORKER) == 0 || job.cluster.count(pb::PS) == 0)
    return make_error(errc::invalid_config, path + ": a training job needs at least one worker and one ps task");
  return std::optional<job_spec>{std::move(job)};
}

}  // namespace actorps
