/* starchol_sim: replay a recorded starchol task graph on SimGrid (see starchol_sim.h).
 *
 * 1. Dependencies, from the records in submission order (StarPU's sequential
 *    consistency per data handle): a task depends on the last writer of each datum it
 *    reads (RAW), and a task that writes a datum on its last writer (WAW) and on every
 *    reader since (WAR). A task runs on the owner of the datum it writes. A datum read
 *    on another node than its owner arrives by a transfer (owner -> reader's node) that
 *    starts when its version is written; with the cache on, one transfer per (version,
 *    node) until a cache flush of that datum, with it off one per (task, operand) --
 *    the rules of starchol/model/volume.py. A transfer reads the datum on its owner (a later
 *    write waits for it).
 * 2. Simulation on SimGrid, without actors: every activity is started from the
 *    completion callback of the one that made it ready. A node's W workers take its
 *    ready tasks highest priority first (ties: submission order), as StarPU's prio
 *    scheduler does; a transfer starts as soon as its datum is written.
 * 3. The submission window (in->window > 0): each node submits the iterations of the
 *    graph (record[11]) in order, iteration k once its own tasks of iteration
 *    k - window are done; a ready task or transfer waits for it (Sim::held).
 */
#include "starchol_sim.h"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <exception>
#include <cstdio>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

struct Graph {
  int64_t ntasks = 0;
  std::vector<int32_t> task_node;                  // per task
  std::vector<int64_t> prio;                       // per task
  std::vector<int32_t> xfer_src, xfer_dst;         // per transfer
  std::vector<int64_t> xfer_bytes;
  std::vector<int64_t> xfer_prio;                  // the priority of the task it feeds
  std::vector<int64_t> indeg;                      // per event (tasks, then transfers)
  std::vector<int64_t> succ_start, succ;           // CSR of successors
  std::vector<int64_t> order;                      // a topological order of the events
  std::vector<double> release;                     // per event: s, submitted (0: at once)
  // the window: per event the iteration of the task (that it feeds, for a transfer);
  // per node and iteration the tasks it runs
  int64_t niter = 1;
  std::vector<int64_t> iter;
  std::vector<std::vector<int64_t>> node_iter_tasks;
};

struct DataState {
  int64_t last_writer = -1;
  std::vector<int64_t> readers;                    // events that read it since the write
  std::vector<std::pair<int32_t, int64_t>> cached; // (node, transfer) of this version
};

int build_graph(const starchol_sim_input* in, Graph& g, char* err, int errlen)
{
  g.ntasks = in->ntasks;
  g.task_node.assign(in->ntasks, -1);
  g.prio.assign(in->ntasks, 0);
  std::vector<DataState> data(in->ndata);
  std::vector<std::pair<int64_t, int64_t>> edges;
  edges.reserve(in->ntasks * 3);
  g.order.reserve(in->ntasks * 2);
  int64_t t = 0;
  // submission clocks (starchol_sim.h): per node, the tasks it took part in so far
  bool submit = in->insert_s > 0 || in->startup_s > 0 ||
                (in->submit_every_task && in->walk_s > 0);
  std::vector<int64_t> part(submit ? in->nodes : 0, 0);
  g.release.assign(submit ? in->ntasks : 0, 0.0);
  auto clock_of = [&](int32_t node, int64_t task) {
    double c = in->startup_s + in->insert_s * (double)part[node];
    if (in->submit_every_task)
      c += in->walk_s * (double)(task + 1 - part[node]);
    return c;
  };
  double task_release = 0;                         // the task's on its node
  int64_t rec_iter = 0;                            // the task's iteration (the window)
  if (in->window > 0) {
    g.iter.assign(in->ntasks, 0);
    for (int64_t r = 0; r < in->nrec; r++) {
      const int64_t* rec = in->rec + r * STARCHOL_REC_WIDTH;
      if (rec[0] != 0 and rec[11] < 0) {
        snprintf(err, errlen, "record %lld: iteration %lld < 0", (long long)r,
                 (long long)rec[11]);
        return 1;
      }
      if (rec[0] != 0)
        g.niter = std::max(g.niter, rec[11] + 1);
    }
    g.node_iter_tasks.assign(in->nodes, std::vector<int64_t>(g.niter, 0));
  }
  auto new_transfer = [&](int64_t d, int32_t src, int32_t dst, int64_t prio) {
    int64_t x = in->ntasks + (int64_t)g.xfer_src.size();
    if (submit)                                    // both ends have submitted the task
      g.release.push_back(std::max(task_release, clock_of(src, t)));
    g.xfer_prio.push_back(prio);
    g.xfer_src.push_back(src);
    g.xfer_dst.push_back(dst);
    g.xfer_bytes.push_back(in->data_bytes[d]);
    if (in->window > 0)
      g.iter.push_back(rec_iter);
    if (data[d].last_writer >= 0)
      edges.emplace_back(data[d].last_writer, x);
    data[d].readers.push_back(x);
    g.order.push_back(x);
    return x;
  };
  for (int64_t r = 0; r < in->nrec; r++) {
    const int64_t* rec = in->rec + r * STARCHOL_REC_WIDTH;
    if (rec[0] == 0) {                             // cache flush
      int64_t d = rec[2];
      if (d < 0 || d >= in->ndata) {
        snprintf(err, errlen, "record %lld: flush of data %lld outside 0..%lld",
                 (long long)r, (long long)d, (long long)in->ndata - 1);
        return 1;
      }
      data[d].cached.clear();
      continue;
    }
    if (t >= in->ntasks) {
      snprintf(err, errlen, "more task records than ntasks = %lld", (long long)in->ntasks);
      return 1;
    }
    // the node that runs it: the owner of the datum it writes
    int32_t node = -1;
    for (int k = 0; k < 3; k++) {
      int64_t d = rec[2 + 3 * k], mode = rec[3 + 3 * k], own = rec[4 + 3 * k];
      if (d < 0)
        continue;
      if (d >= in->ndata || own < 0 || own >= in->nodes) {
        snprintf(err, errlen, "record %lld: data %lld or owner %lld out of range",
                 (long long)r, (long long)d, (long long)own);
        return 1;
      }
      if (mode & STARCHOL_MODE_W)
        node = (int32_t)own;
    }
    if (node < 0) {
      snprintf(err, errlen, "record %lld: a task that writes no datum", (long long)r);
      return 1;
    }
    g.task_node[t] = node;
    g.prio[t] = rec[1];
    if (in->window > 0) {
      rec_iter = rec[11];
      g.iter[t] = rec_iter;
      g.node_iter_tasks[node][rec_iter]++;
    }
    if (submit) {
      // the nodes that take part: the runner and the owners of its operands
      int32_t seen[4] = {node, -1, -1, -1};
      int nseen = 1;
      part[node]++;
      for (int k = 0; k < 3; k++) {
        int64_t d = rec[2 + 3 * k];
        int32_t own = (int32_t)rec[4 + 3 * k];
        if (d < 0)
          continue;
        bool dup = false;
        for (int i = 0; i < nseen; i++)
          dup = dup || seen[i] == own;
        if (!dup) {
          seen[nseen++] = own;
          part[own]++;
        }
      }
      task_release = clock_of(node, t);
      g.release[t] = task_release;
    }
    for (int k = 0; k < 3; k++) {
      int64_t d = rec[2 + 3 * k], mode = rec[3 + 3 * k];
      int32_t own = (int32_t)rec[4 + 3 * k];
      if (d < 0)
        continue;
      DataState& s = data[d];
      if (mode & STARCHOL_MODE_W) {
        if (own != node) {
          snprintf(err, errlen, "record %lld: writes data owned by another node", (long long)r);
          return 1;
        }
        if (s.last_writer >= 0)
          edges.emplace_back(s.last_writer, t);
        for (int64_t x : s.readers)
          if (x != t)
            edges.emplace_back(x, t);
        s.last_writer = t;
        s.readers.clear();
        s.cached.clear();                          // a new version
      } else if (own != node) {                    // a remote read
        int64_t x = -1;
        if (in->cache)
          for (auto& c : s.cached)
            if (c.first == node)
              x = c.second;
        if (x < 0) {
          x = new_transfer(d, own, node, rec[1]);
          if (in->cache)
            s.cached.emplace_back(node, x);
        }
        edges.emplace_back(x, t);
      } else {                                     // a local read
        if (s.last_writer >= 0)
          edges.emplace_back(s.last_writer, t);
        s.readers.push_back(t);
      }
    }
    g.order.push_back(t);
    t++;
  }
  if (t != in->ntasks) {
    snprintf(err, errlen, "%lld task records, ntasks = %lld", (long long)t, (long long)in->ntasks);
    return 1;
  }
  int64_t nev = in->ntasks + (int64_t)g.xfer_src.size();
  g.indeg.assign(nev, 0);
  g.succ_start.assign(nev + 1, 0);
  for (auto& e : edges) {
    g.succ_start[e.first + 1]++;
    g.indeg[e.second]++;
  }
  for (int64_t i = 0; i < nev; i++)
    g.succ_start[i + 1] += g.succ_start[i];
  g.succ.resize(edges.size());
  std::vector<int64_t> fill(g.succ_start.begin(), g.succ_start.end() - 1);
  for (auto& e : edges)
    g.succ[fill[e.first]++] = e.second;
  return 0;
}

struct ReadyKey {
  int64_t prio;
  int64_t task;
  bool operator<(const ReadyKey& o) const
  {
    // std::priority_queue pops the largest: highest priority, then earliest submitted
    return prio < o.prio || (prio == o.prio && task > o.task);
  }
};

// the latency of the route from node a to node b: both nodes' links, and the backbone's
double route_latency(const starchol_sim_input* in, int32_t a, int32_t b)
{
  double lat = in->latency[a] + in->latency[b];
  if (in->backbone_bandwidth > 0)
    lat += in->backbone_latency;
  return lat;
}

// what an activity's completion means
enum Kind { K_TASK, K_BYTES, K_ARRIVED, K_RELEASED, K_SEND_CPU, K_RECV_CPU, K_SENT_CPU };

struct Running {
  sg4::ActivityPtr act;
  int64_t ev;
  Kind kind;
};

struct Sim {
  const starchol_sim_input* in;
  starchol_sim_output* out;
  Graph* g;
  std::vector<sg4::Host*> hosts;
  sg4::Host* delay_host = nullptr;                    // runs the delays (latency, CPU, timers)
  std::vector<std::priority_queue<ReadyKey>> ready;
  std::vector<std::priority_queue<ReadyKey>> sends;   // per (sender, receiver)
  std::vector<char> pair_busy;                        // per (sender, receiver)
  std::vector<int> in_flight;                         // per sender
  std::vector<std::vector<int32_t>> free_workers;
  // per node: the communication thread's messages waiting (FIFO) and whether it is busy
  std::vector<std::queue<std::pair<int64_t, Kind>>> comm_queue;
  std::vector<char> comm_busy;
  std::vector<int64_t> indeg;
  std::unordered_map<const sg4::Activity*, Running> running;
  std::vector<sg4::ActivityPtr> graveyard;
  int64_t done = 0;
  // events made ready before they are submitted, earliest release first; one timer
  // (a delay) runs for the earliest at a time
  std::priority_queue<std::pair<double, int64_t>, std::vector<std::pair<double, int64_t>>,
                      std::greater<std::pair<double, int64_t>>> pending;
  double timer_at = -1;                            // the armed timer's time (-1: none)
  int64_t timer_id = 0;                            // the armed timer's number
  int64_t send_seq = 0;
  int64_t ready_seq = 0;                           // tasks made ready so far (tasks_fifo)                            // sends made ready so far (sends_fifo)
  double speed = 1e9;                              // flop/s of a worker: time = flops / speed
  // the window: per node, the iterations submitted (0..sub-1), its tasks of each
  // iteration not yet done, and the ready events that wait for an iteration
  std::vector<int64_t> sub;
  std::vector<std::vector<int64_t>> left;
  std::vector<std::vector<std::vector<int64_t>>> held;

  // whether `node` has submitted iteration k; else `ev` waits there
  bool submitted(int32_t node, int64_t k, int64_t ev)
  {
    if (k < sub[node])
      return true;
    held[node][k].push_back(ev);
    return false;
  }

  // node submits its next iterations while the one `window` back is done (a wait
  // returns at once for an iteration without tasks on the node)
  void advance(int32_t node, std::vector<int32_t>& touched)
  {
    while (sub[node] < g->niter and left[node][sub[node] - in->window] == 0) {
      int64_t k = sub[node]++;
      std::vector<int64_t> evs;
      evs.swap(held[node][k]);
      for (int64_t ev : evs)
        make_ready(ev, touched);
    }
  }

  // a delay of `seconds` on the delay host, whose completion means `kind` for `ev`
  void delay(double seconds, int64_t ev, Kind kind)
  {
    sg4::ExecPtr d = sg4::Exec::init();
    d->set_flops_amount(seconds * speed)->set_host(delay_host);
    running.emplace(d.get(), Running{sg4::ActivityPtr(d), ev, kind});
    d->start();
  }

  void start_tasks(int32_t node)
  {
    auto& q = ready[node];
    auto& w = free_workers[node];
    while (not q.empty() and not w.empty()) {
      int64_t t = q.top().task;
      q.pop();
      int32_t worker = w.back();
      w.pop_back();
      out->worker[t] = worker;
      out->start[t] = sg4::Engine::get_clock();
      sg4::ExecPtr e = sg4::Exec::init();
      e->set_flops_amount(in->duration[t] * speed)->set_host(hosts[node]);
      running.emplace(e.get(), Running{sg4::ActivityPtr(e), t, K_TASK});
      e->start();
    }
  }

  // a ready task joins its node's queue (the caller then starts tasks on `touched`
  // nodes, so that all tasks made ready at once compete by priority); a ready transfer
  // joins its sender's send queue. Either waits first until it is submitted.
  void make_ready(int64_t ev, std::vector<int32_t>& touched)
  {
    if (in->window > 0) {
      int64_t k = g->iter[ev];
      if (ev < g->ntasks) {
        if (not submitted(g->task_node[ev], k, ev))
          return;
      } else {
        int64_t x = ev - g->ntasks;
        if (not submitted(g->xfer_src[x], k, ev) or not submitted(g->xfer_dst[x], k, ev))
          return;
      }
    }
    if (not g->release.empty()) {
      double now = sg4::Engine::get_clock();
      if (g->release[ev] > later(now)) {
        pending.emplace(g->release[ev], ev);
        arm_timer();
        return;
      }
    }
    if (ev < g->ntasks) {
      int32_t node = g->task_node[ev];
      ready[node].push(ReadyKey{in->tasks_fifo ? -(ready_seq++) : g->prio[ev], ev});
      touched.push_back(node);
    } else {
      int64_t x = ev - g->ntasks;
      int32_t src = g->xfer_src[x];
      int64_t key = in->sends_fifo ? -(send_seq++) : g->xfer_prio[x];
      sends[(int64_t)src * in->nodes + g->xfer_dst[x]].push(ReadyKey{key, ev});
      start_sends(src);
    }
  }

  // `now` and what SimGrid's rounding may leave of a delay (its precision is about
  // 1e-9 s; 0.1 us is far below any task or transfer)
  static double later(double now) { return now + 1e-7; }

  // a timer for the earliest pending release, unless one runs for it or earlier
  void arm_timer()
  {
    if (pending.empty())
      return;
    double at = pending.top().first;
    if (timer_at >= 0 and timer_at <= at)
      return;
    timer_at = at;
    delay(std::max(0.0, at - sg4::Engine::get_clock()), ++timer_id, K_RELEASED);
  }

  // the node's communication thread handles one message at a time, in arrival order
  void comm_cpu(int32_t node, int64_t ev, Kind kind)
  {
    comm_queue[node].emplace(ev, kind);
    next_comm_cpu(node);
  }

  // the node's thread has finished its message: it takes the next one
  void comm_done(int32_t node)
  {
    comm_busy[node] = 0;
    next_comm_cpu(node);
  }

  void next_comm_cpu(int32_t node)
  {
    if (comm_busy[node] or comm_queue[node].empty())
      return;
    auto job = comm_queue[node].front();
    comm_queue[node].pop();
    comm_busy[node] = 1;
    double s = in->message_overhead;
    if (job.second == K_RECV_CPU)
      s += in->receive_overhead;                  // the receiver's own share
    else if (job.second == K_SENT_CPU)
      s = in->sent_overhead;                      // the sender's, after the bytes left
    delay(s, job.first, job.second);
  }

  // the bytes of transfer event ev start on the route
  void start_bytes(int64_t ev)
  {
    int64_t x = ev - g->ntasks;
    sg4::CommPtr c = sg4::Comm::sendto_init(hosts[g->xfer_src[x]], hosts[g->xfer_dst[x]]);
    c->set_payload_size(g->xfer_bytes[x]);
    running.emplace(c.get(), Running{sg4::ActivityPtr(c), ev, K_BYTES});
    c->start();
  }

  // a node's ready sends start in priority order (ties: creation order), at most
  // sends_in_flight at once; with pair_serial, one at a time to each destination
  void start_sends(int32_t node)
  {
    int P = in->nodes;
    while (in->sends_in_flight <= 0 or in_flight[node] < in->sends_in_flight) {
      int best = -1;
      for (int d = 0; d < P; d++) {
        auto& q = sends[(int64_t)node * P + d];
        if (q.empty() or (in->pair_serial and pair_busy[(int64_t)node * P + d]))
          continue;
        if (best < 0 or sends[(int64_t)node * P + best].top() < q.top())
          best = d;
      }
      if (best < 0)
        break;
      auto& q = sends[(int64_t)node * P + best];
      int64_t ev = q.top().task;
      q.pop();
      in_flight[node]++;
      pair_busy[(int64_t)node * P + best] = 1;
      if (in->message_overhead > 0)
        comm_cpu(node, ev, K_SEND_CPU);
      else
        start_bytes(ev);
    }
  }

  void completed(const sg4::Activity& a)
  {
    auto it = running.find(&a);
    if (it == running.end())
      return;
    int64_t ev = it->second.ev;
    Kind kind = it->second.kind;
    // SimGrid still uses the activity after this callback: keep it alive until the
    // next completion (the previous one is then done with)
    graveyard.clear();
    graveyard.push_back(it->second.act);
    running.erase(it);
    std::vector<int32_t> touched;
    switch (kind) {
      case K_RELEASED: {                           // the pending ones submitted by now
        double now = sg4::Engine::get_clock();
        if (ev == timer_id)
          timer_at = -1;                           // the armed timer (not one superseded)
        while (not pending.empty() and pending.top().first <= later(now)) {
          int64_t e = pending.top().second;
          pending.pop();
          make_ready(e, touched);
        }
        arm_timer();
        for (int32_t node : touched)
          start_tasks(node);
        return;
      }
      case K_SEND_CPU:                             // the sender's thread posted it
        comm_done(g->xfer_src[ev - g->ntasks]);
        start_bytes(ev);
        return;
      case K_SENT_CPU:                             // the sender's thread is done with it
        comm_done(g->xfer_src[ev - g->ntasks]);
        return;
      case K_BYTES: {
        // the bytes have left the sender (the links carry them without latency): its
        // send slot is free at once, and the transfer arrives one route latency later,
        // so that the sends of a node follow each other without waiting for a latency
        // each (as TCP streams them)
        int64_t x = ev - g->ntasks;
        int32_t src = g->xfer_src[x], dst = g->xfer_dst[x];
        in_flight[src]--;
        pair_busy[(int64_t)src * in->nodes + dst] = 0;
        start_sends(src);
        if (in->sent_overhead > 0)                 // the sender's thread completes it
          comm_cpu(src, ev, K_SENT_CPU);
        double lat = route_latency(in, src, dst);
        if (lat > 0) {
          delay(lat, ev, K_ARRIVED);
          return;
        }
      }
      // fall through: arrived at once
      case K_ARRIVED:
        if (in->message_overhead > 0 || in->receive_overhead > 0) {  // the receiver's thread takes it in
          comm_cpu(g->xfer_dst[ev - g->ntasks], ev, K_RECV_CPU);
          return;
        }
        break;
      case K_RECV_CPU:
        comm_done(g->xfer_dst[ev - g->ntasks]);
        break;
      case K_TASK: {
        int32_t node = g->task_node[ev];
        out->end[ev] = sg4::Engine::get_clock();
        free_workers[node].push_back(out->worker[ev]);
        done++;
        if (in->window > 0) {
          left[node][g->iter[ev]]--;
          advance(node, touched);
        }
        if (in->progress != nullptr && in->progress_every > 0 &&
            done % in->progress_every == 0)
          in->progress(in->progress_ctx, done, g->ntasks);
        touched.push_back(node);
        break;
      }
    }
    if (ev >= g->ntasks) {                         // a transfer delivered
      int64_t x = ev - g->ntasks;
      out->pair_bytes[(int64_t)g->xfer_src[x] * in->nodes + g->xfer_dst[x]] += g->xfer_bytes[x];
    }
    for (int64_t i = g->succ_start[ev]; i < g->succ_start[ev + 1]; i++) {
      int64_t s = g->succ[i];
      if (--indeg[s] == 0)
        make_ready(s, touched);
    }
    for (int32_t node : touched)
      start_tasks(node);
  }
};

double transfer_time(const starchol_sim_input* in, int32_t a, int32_t b, int64_t bytes)
{
  double bw = std::min(in->bandwidth[a], in->bandwidth[b]);
  if (in->backbone_bandwidth > 0)
    bw = std::min(bw, in->backbone_bandwidth);
  if (in->comm_throughput != nullptr) {
    if (in->comm_throughput[a] > 0)
      bw = std::min(bw, in->comm_throughput[a]);
    if (in->comm_throughput[b] > 0)
      bw = std::min(bw, in->comm_throughput[b]);
  }
  return route_latency(in, a, b) + (double)bytes / bw + 2 * in->message_overhead +
         in->receive_overhead;
}

void critical_paths(const starchol_sim_input* in, const Graph& g, starchol_sim_output* out)
{
  int64_t nev = (int64_t)g.indeg.size();
  std::vector<double> a(nev, 0.0), b(nev, 0.0);   // longest finish: no comm, with comm
  double best_a = 0, best_b = 0;
  for (int64_t ev : g.order) {
    double wa = 0, wb = 0;
    if (ev < g.ntasks) {
      wa = wb = in->duration[ev];
    } else {
      int64_t x = ev - g.ntasks;
      wb = transfer_time(in, g.xfer_src[x], g.xfer_dst[x], g.xfer_bytes[x]);
    }
    a[ev] += wa;
    b[ev] += wb;
    best_a = std::max(best_a, a[ev]);
    best_b = std::max(best_b, b[ev]);
    for (int64_t i = g.succ_start[ev]; i < g.succ_start[ev + 1]; i++) {
      int64_t s = g.succ[i];
      a[s] = std::max(a[s], a[ev]);
      b[s] = std::max(b[s], b[ev]);
    }
  }
  out->critical_path = best_a;
  out->critical_path_comm = best_b;
}

}  // namespace

static int simulate(const starchol_sim_input* in, starchol_sim_output* out, char* err,
                    int errlen)
{
  Graph g;
  if (build_graph(in, g, err, errlen) != 0)
    return 1;
  out->ntransfers = (int64_t)g.xfer_src.size();
  critical_paths(in, g, out);

  // SimGrid: one engine per process (the caller runs each simulation in a process of
  // its own). CM02 without TCP window or cross traffic: a transfer alone on its route
  // takes the sum of the latencies plus bytes / the smallest bandwidth.
  int argc = 2;
  char name[] = "starchol-simulate";
  char quiet[] = "--log=root.thr:critical";
  char* argv[] = {name, quiet, nullptr};
  sg4::Engine e(&argc, argv);
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
  sg4::Engine::set_config("network/latency-factor:1");
  sg4::Engine::set_config("network/bandwidth-factor:1");
  auto* zone = sg4::create_full_zone("starchol");
  Sim sim;
  sim.in = in;
  sim.out = out;
  sim.g = &g;
  std::vector<sg4::SplitDuplexLink*> links;
  std::vector<sg4::Link*> comm;
  for (int i = 0; i < in->nodes; i++) {
    auto* h = zone->create_host("node" + std::to_string(i), sim.speed);
    h->set_core_count(in->cores[i]);
    h->seal();
    sim.hosts.push_back(h);
    // latencies are not the links': a transfer's starts when its bytes have left
    // (Sim::completed), so that a node's next send need not wait for it
    auto* l = zone->create_split_duplex_link("link" + std::to_string(i), in->bandwidth[i]);
    l->set_latency(0);
    l->seal();
    links.push_back(l);
    // the node's communication, sends and receives together (one shared resource)
    sg4::Link* c = nullptr;
    if (in->comm_throughput != nullptr && in->comm_throughput[i] > 0) {
      c = zone->create_link("comm" + std::to_string(i), in->comm_throughput[i]);
      c->set_latency(0);
      c->seal();
    }
    comm.push_back(c);
  }
  sg4::Link* backbone = nullptr;
  if (in->backbone_bandwidth > 0) {
    backbone = zone->create_link("backbone", in->backbone_bandwidth);
    backbone->set_latency(0);
    backbone->seal();
  }
  using D = sg4::LinkInRoute::Direction;
  for (int i = 0; i < in->nodes; i++)
    for (int j = 0; j < in->nodes; j++) {
      if (i == j)
        continue;
      std::vector<sg4::LinkInRoute> route;
      if (comm[i] != nullptr)
        route.emplace_back(comm[i]);
      route.emplace_back(links[i], D::UP);
      if (backbone != nullptr)
        route.emplace_back(backbone);
      route.emplace_back(links[j], D::DOWN);
      if (comm[j] != nullptr)
        route.emplace_back(comm[j]);
      zone->add_route(sim.hosts[i]->get_netpoint(), sim.hosts[j]->get_netpoint(), nullptr,
                      nullptr, route, false);
    }
  // one host, never busy, whose executions are the delays (the transfers' latencies, the
  // communication threads' time per message, the waits for submission): as many cores
  // as delays can run at once (one per event at most), each at the workers' speed
  sim.delay_host = zone->create_host("latency", sim.speed);
  sim.delay_host->set_core_count((int)std::min<int64_t>(
      std::max<int64_t>(1, g.ntasks + (int64_t)g.xfer_src.size()), 1 << 30));
  sim.delay_host->seal();
  zone->seal();

  sim.ready.resize(in->nodes);
  sim.sends.resize((size_t)in->nodes * in->nodes);
  sim.pair_busy.assign((size_t)in->nodes * in->nodes, 0);
  sim.in_flight.assign(in->nodes, 0);
  sim.comm_queue.resize(in->nodes);
  sim.comm_busy.assign(in->nodes, 0);
  sim.free_workers.resize(in->nodes);
  for (int i = 0; i < in->nodes; i++)
    for (int w = in->cores[i] - 1; w >= 0; w--)
      sim.free_workers[i].push_back(w);
  sim.indeg = g.indeg;
  if (in->window > 0) {
    sim.sub.assign(in->nodes, std::min<int64_t>(in->window, g.niter));
    sim.left = g.node_iter_tasks;
    sim.held.assign(in->nodes, std::vector<std::vector<int64_t>>(g.niter));
    std::vector<int32_t> none;
    for (int i = 0; i < in->nodes; i++)
      sim.advance(i, none);
  }
  for (int64_t i = 0; i < g.ntasks; i++) {
    out->node[i] = g.task_node[i];
    out->start[i] = out->end[i] = -1;
    out->worker[i] = -1;
  }
  sg4::Activity::on_completion_cb([&sim](const sg4::Activity& a) { sim.completed(a); });
  std::vector<int32_t> touched;
  for (int64_t ev : g.order)
    if (sim.indeg[ev] == 0)
      sim.make_ready(ev, touched);
  for (int i = 0; i < in->nodes; i++)
    sim.start_tasks(i);
  e.run();
  if (sim.done != g.ntasks) {
    snprintf(err, errlen, "the simulation stopped with %lld of %lld tasks done (a cycle in "
             "the graph?)", (long long)sim.done, (long long)g.ntasks);
    return 1;
  }
  out->makespan = sg4::Engine::get_clock();
  for (int i = 0; i < in->nodes; i++)
    out->busy[i] = 0;
  for (int64_t i = 0; i < g.ntasks; i++)
    out->busy[g.task_node[i]] += in->duration[i];
  return 0;
}

extern "C" int starchol_simulate(const starchol_sim_input* in, starchol_sim_output* out,
                                 char* err, int errlen)
{
  err[0] = '\0';
  try {
    return simulate(in, out, err, errlen);
  } catch (const std::exception& exc) {
    snprintf(err, errlen, "SimGrid: %s", exc.what());
  } catch (...) {
    snprintf(err, errlen, "SimGrid: an unknown C++ exception");
  }
  return 1;
}
