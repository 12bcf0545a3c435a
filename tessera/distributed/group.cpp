#include "tessera/distributed/group.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "tessera/backend/cuda.h"
#include "tessera/core/error.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/work_queue.h"
#include "tessera/distributed/file_store.h"
#include "tessera/distributed/gloo/gloo_group.h"
#include "tessera/distributed/memory_store.h"
#include "tessera/distributed/redis_store.h"
#include "tessera/distributed/rendezvous.h"
#include "tessera/distributed/solo_group.h"
#include "tessera/distributed/spmd_check.h"
#ifdef TESSERA_HAVE_MPI
#include "tessera/distributed/mpi/mpi_group.h"
#endif
#ifdef TESSERA_HAVE_NCCL
#include "tessera/distributed/nccl/nccl_group.h"
#endif

namespace tessera::distributed {

namespace {
std::atomic<int64_t> traffic_calls{0};
std::atomic<int64_t> traffic_bytes{0};
}  // namespace

Traffic traffic() {
  return {traffic_calls.load(), traffic_bytes.load()};
}

void reset_traffic() {
  traffic_calls = 0;
  traffic_bytes = 0;
}

void count_traffic(const Tensor& payload) {
  traffic_calls += 1;
  traffic_bytes += payload.numel() * static_cast<int64_t>(dtype_size(payload.dtype()));
}

void count_traffic(const std::vector<Tensor>& payload) {
  int64_t bytes = 0;
  for (const Tensor& piece : payload)
    bytes += piece.numel() * static_cast<int64_t>(dtype_size(piece.dtype()));
  traffic_calls += 1;
  traffic_bytes += bytes;
}

struct Group::Launcher {
  // Kernels run on the queue's thread call ops: none of them is recorded.
  WorkQueue queue{[] { set_grad_enabled(false); }};
};

Group::Group() = default;

// A backend whose collectives may run on the communication thread waits
// for them in its own destructor, while its members still exist.
Group::~Group() = default;

std::shared_ptr<Work> Group::launch(
    std::function<void()> collective, bool async,
    const std::function<void(const std::shared_ptr<Work>&)>& on_queued) {
  if (async && concurrent_groups()) {
    if (!launcher_) launcher_ = std::make_unique<Launcher>();
    return launcher_->queue.submit(std::move(collective), on_queued);
  }
  // Now, on this thread, but after what is in flight: every rank issues
  // this group's collectives in one order.
  wait_launched();
  try {
    collective();
  } catch (...) {
    return completed_work(std::current_exception());
  }
  return completed_work();
}

void Group::all_gather_into(const Tensor& piece, const Tensor& out, int64_t dim,
                            const std::vector<int64_t>& sizes) {
  const std::vector<Tensor> parts = all_gather_uneven(piece.contiguous().reshape({-1}));
  write_blocks("all_gather", out, dim, sizes, parts);
}

void write_blocks(const char* op, const Tensor& out, int64_t dim, const std::vector<int64_t>& sizes,
                  const std::vector<Tensor>& parts) {
  TESSERA_CHECK(dim >= 0 && dim < out.dim() && sizes.size() == parts.size(), "[", op, "] ",
                parts.size(), " pieces with ", sizes.size(), " sizes along dim ", dim, " of ",
                shape_str(out.shape()));
  Shape shape = out.shape();
  int64_t at = 0;
  for (size_t q = 0; q < parts.size(); ++q) {
    shape[static_cast<size_t>(dim)] = sizes[q];
    TESSERA_CHECK(parts[q].numel() == numel(shape), "[", op, "] rank ", q, " sent ",
                  parts[q].numel(), " elements where ", numel(shape), " (", shape_str(shape),
                  ") were expected");
    if (sizes[q] > 0) out.narrow(dim, at, sizes[q]).copy_(parts[q].reshape(shape));
    at += sizes[q];
  }
}

void Group::wait_launched() {
  if (launcher_ && !launcher_->queue.on_queue_thread()) launcher_->queue.drain();
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "unknown";
}

namespace {

// The store the rendezvous URL names; a lone process without one keeps its
// keys in memory, so it leaves no folder behind.
std::shared_ptr<Store> open_store(const Environment& env) {
  const std::string file_prefix = "file://";
  if (env.rendezvous.empty()) {
    TESSERA_CHECK(env.world_size == 1, "[init_process_group] no rendezvous (TESSERA_RDZV) for ",
                  env.world_size, " ranks; set TESSERA_RDZV=file:///shared/dir");
    return std::make_shared<MemoryStore>(env.timeout);
  }
  if (env.rendezvous.rfind(file_prefix, 0) == 0) {
    return std::make_shared<FileStore>(env.rendezvous.substr(file_prefix.size()), env.timeout);
  }
  if (env.rendezvous.rfind("redis://", 0) == 0) {
    const RedisUrl url = RedisUrl::parse(env.rendezvous);
    return std::make_shared<RedisStore>(url.host, url.port, url.key_prefix(), env.timeout);
  }
  TESSERA_FAIL("[init_process_group] rendezvous '", env.rendezvous,
               "' is not supported; use file:///shared/dir or redis://host:port/job");
}

// The MPI world group, or an error saying why there is none.
std::shared_ptr<Group> init_mpi(std::chrono::milliseconds timeout) {
  TESSERA_CHECK(mpi_backend_built(),
                "[init_process_group] the mpi backend is not built into this Tessera (configure "
                "with OpenMPI installed and -DTESSERA_WITH_MPI=ON); valid here: gloo");
  TESSERA_CHECK(launched_by_mpirun(),
                "[init_process_group] the mpi backend needs ranks started by mpirun "
                "(OMPI_COMM_WORLD_SIZE is not set): run `mpirun -n N prog`, or use "
                "TESSERA_BACKEND=gloo with tessera-run");
#ifdef TESSERA_HAVE_MPI
  std::shared_ptr<Group> group = with_spmd_check(MpiGroup::world(timeout));
  set_default_group(group);
  return group;
#else
  (void)timeout;
  return nullptr;
#endif
}

// Throws unless the nccl backend is built in and this process sees a CUDA device.
void check_nccl_usable() {
  TESSERA_CHECK(nccl_backend_built(),
                "[init_process_group] the nccl backend is not built into this Tessera (configure "
                "with the CUDA toolkit and NCCL installed and -DTESSERA_WITH_CUDA=ON); valid here: "
                "gloo",
                mpi_backend_built() ? ", mpi" : "");
  TESSERA_CHECK(cuda::is_available(), "[init_process_group] the nccl backend needs a CUDA device: ",
                cuda::unavailable_reason(), "; use TESSERA_BACKEND=gloo for CPU tensors");
}

// The NCCL group of `env`'s ranks, on cuda:(LOCAL_RANK mod the devices this process sees).
std::shared_ptr<Group> make_nccl_group(const Environment& env, std::shared_ptr<Store> store,
                                       const std::string& prefix) {
#ifdef TESSERA_HAVE_NCCL
  std::vector<int> job_ranks(static_cast<size_t>(env.world_size));
  for (int r = 0; r < env.world_size; ++r) job_ranks[static_cast<size_t>(r)] = r;
  return std::make_shared<NcclGroup>(std::move(store), prefix + "world/", env.rank, env.world_size,
                                     env.local_rank % cuda::device_count(), env.timeout, prefix,
                                     std::move(job_ranks));
#else
  (void)env;
  (void)store;
  (void)prefix;
  return nullptr;
#endif
}

}  // namespace

std::shared_ptr<Group> init_process_group() {
  const Backend backend = backend_from_env();
  if (backend == Backend::mpi) return init_mpi(timeout_from_env());
  return init_process_group(Environment::from_env(), backend);
}

std::shared_ptr<Group> init_process_group(const Environment& env) {
  return init_process_group(env, backend_from_env());
}

std::shared_ptr<Group> init_process_group(const Environment& env, Backend backend) {
  if (backend == Backend::mpi) return init_mpi(env.timeout);
  if (backend == Backend::nccl) check_nccl_usable();
  TESSERA_CHECK(env.world_size >= 1 && env.rank >= 0 && env.rank < env.world_size,
                "[init_process_group] rank ", env.rank, " is outside [0, ", env.world_size, ")");
  // One deadline for the whole rendezvous and connection, as the timeout promises.
  const Deadline deadline(env.timeout);
  std::shared_ptr<Store> store = open_store(env);
  // Every key is bound to the job, and each rank is claimed atomically, so
  // neither an earlier job's keys nor a second job started at once on the
  // same rendezvous can join this one.
  const std::string job_prefix = job_key_prefix(job_id_from_env());
  join_rendezvous(*store, job_prefix, env.rank, env.world_size, env.rendezvous, deadline);
  if (backend == Backend::nccl) {
    std::shared_ptr<Group> group =
        with_spmd_check(make_nccl_group(env, std::move(store), job_prefix));
    set_default_group(group);
    return group;
  }
  // Ranks on one machine talk over loopback; across machines peers dial the host name.
  std::string hostname = "127.0.0.1";
  if (env.local_world_size < env.world_size) {
    char name[256] = {};
    TESSERA_CHECK(::gethostname(name, sizeof(name) - 1) == 0,
                  "[init_process_group] gethostname failed");
    hostname = name;
  }
  std::shared_ptr<Group> group = with_spmd_check(
      std::make_shared<GlooGroup>(store, job_prefix + "world/", env.rank, env.world_size,
                                  env.timeout, hostname, job_prefix, deadline.left()));
  set_default_group(group);
  return group;
}

namespace {

std::mutex default_group_mutex;
std::shared_ptr<Group>& default_group_slot() {
  static auto* slot = new std::shared_ptr<Group>();
  return *slot;
}

}  // namespace

std::shared_ptr<Group> default_group() {
  std::lock_guard<std::mutex> lock(default_group_mutex);
  std::shared_ptr<Group>& slot = default_group_slot();
  if (!slot) slot = std::make_shared<SoloGroup>();
  return slot;
}

void set_default_group(std::shared_ptr<Group> group) {
  std::lock_guard<std::mutex> lock(default_group_mutex);
  default_group_slot() = std::move(group);
}

}  // namespace tessera::distributed
