#include "autoloco/train/elastic_settings.hpp"

#include <fmt/format.h>

#include "autoloco/comm/handshake.hpp"

namespace autoloco {

ElasticSettings elastic_settings(const Config& c) {
  const ElasticConfig& e = c.elastic;
  ElasticSettings s;
  s.lighthouse = Endpoint::parse(e.lighthouse, "elastic.lighthouse");
  s.key = load_shared_key(e.key_file, "elastic.key_file");
  s.dc = static_cast<int>(e.dc);
  s.port = static_cast<int>(e.port);
  s.advertise = e.advertise;
  s.heartbeat_s = e.heartbeat_s;
  s.heartbeat_timeout_s = e.heartbeat_timeout_s;
  s.collective_timeout_s = e.collective_timeout_s;
  s.quorum_timeout_s = e.quorum_timeout_s;
  const ModelConfig& m = c.model;
  const OuterConfig& o = c.outer;
  const IntervalConfig& i = c.interval;
  // What every dc must share, each field as a person reads it (the lighthouse names the one
  // that differs). The timeouts and the quorum's rules are the lighthouse's settings too.
  s.identity = {
      {"run.ranks_per_dc", std::to_string(c.topology.ranks_per_dc)},
      {"run.model",
       fmt::format("{} {} layers d_model {} heads {}/{} vocab {} seq_len {}", m.arch, m.n_layer,
                   m.d_model, m.n_head, m.n_kv_head, m.vocab_size, m.seq_len)},
      {"run.outer", fmt::format("{} lr {} momentum {} nesterov {} correction {} wire {}{}",
                                o.method, o.lr, o.momentum, o.nesterov, o.correction, o.wire_dtype,
                                o.error_feedback ? " with error feedback" : "")},
      {"run.interval", fmt::format("{} H {} in [{}, {}]", i.controller, i.H, i.H_min, i.H_max)},
      {"run.batch", fmt::format("{} x {} per rank", c.data.batch_size, c.data.grad_accum)},
      {"run.steps", std::to_string(c.run.steps)},
      {"run.seed", std::to_string(c.run.seed)},
      {"run.dcs", std::to_string(e.dcs)},
      {"run.min_dcs", std::to_string(e.min_dcs)},
      {"run.round_deadline_s", fmt::format("{}", e.round_deadline_s)},
      {"run.heartbeat_timeout_s", fmt::format("{}", e.heartbeat_timeout_s)},
      {"run.collective_timeout_s", fmt::format("{}", e.collective_timeout_s)},
  };
  return s;
}

}  // namespace autoloco
