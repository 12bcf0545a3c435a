#pragma once

// Tracing global tensors (tessera/graph): while a ShardTraceScope is alive on
// a thread, a global tensor made there around a meta shard (a tracer's
// stand-in for this rank's real shard) keeps its placement's device. It is
// then not a plan (make_global_meta, no shard anywhere): the global layer
// runs it as it runs real tensors, boxing included, and the tracer records
// the local ops and collectives it issues on the stand-ins.

namespace tessera {

// Whether a ShardTraceScope is alive on this thread.
bool tracing_shards();

class ShardTraceScope {
 public:
  ShardTraceScope();
  ~ShardTraceScope();
  ShardTraceScope(const ShardTraceScope&) = delete;
  ShardTraceScope& operator=(const ShardTraceScope&) = delete;

 private:
  bool previous_;
};

}  // namespace tessera
