// coredag-simgrid runs a schedule that coredag wrote (package simgrid, ../schedule.go) on SimGrid's
// s4u activities: each exec and comm is created and started when the activities it depends on
// have finished, by a worker actor that waits for it.
//
// Usage: coredag-simgrid PLATFORM.xml SCHEDULE [--cfg=...]
//
// The schedule is text:
//   coredag-simgrid-schedule 1
//   hosts N            rank r runs on the platform's host named "r<r>"
//   acts M             then M lines, activity i on line i:
//   e HOST FLOPS       an exec of FLOPS on host HOST
//   c SRC DST BYTES    a comm of BYTES from host SRC to host DST
//   deps K             then K lines "A B": B starts after A finished
//
// It prints "time SECONDS", "finished F of M", "last I" (the activity that finished last),
// "workers W" (the most activities that ran at once) and "wall SECONDS". A malformed schedule or a platform without the hosts is an error on stderr,
// exit status 2; activities that never ran (a cycle) exit status 3.
#include <simgrid/s4u.hpp>

#include <chrono>
#include <functional>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace sg4 = simgrid::s4u;

[[noreturn]] static void fail(const char* fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  std::fputs("coredag-simgrid: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::exit(2);
}

struct Act {
  bool comm;
  int src, dst;
  double amount;
};

int main(int argc, char** argv)
{
  auto t0 = std::chrono::steady_clock::now();
  sg4::Engine e(&argc, argv);
  if (argc != 3)
    fail("usage: %s PLATFORM.xml SCHEDULE [--cfg=...]", argv[0]);
  try {
    e.load_platform(argv[1]);
  } catch (const std::exception& ex) {
    fail("platform %s: %s", argv[1], ex.what());
  }
  FILE* f = std::fopen(argv[2], "r");
  if (f == nullptr)
    fail("%s: %s", argv[2], std::strerror(errno));
  int version = 0;
  if (std::fscanf(f, "coredag-simgrid-schedule %d", &version) != 1 || version != 1)
    fail("%s: not a schedule of version 1", argv[2]);
  long nhosts = 0;
  if (std::fscanf(f, " hosts %ld", &nhosts) != 1 || nhosts < 1 || nhosts > (1L << 24))
    fail("%s: no host count", argv[2]);
  std::vector<sg4::Host*> hosts(nhosts);
  for (long i = 0; i < nhosts; i++) {
    std::string name = "r" + std::to_string(i);
    hosts[i] = e.host_by_name_or_null(name);
    if (hosts[i] == nullptr)
      fail("platform %s has no host %s (rank %ld runs on host %s), and it needs %ld hosts r0..r%ld", argv[1],
           name.c_str(), i, name.c_str(), nhosts, nhosts - 1);
  }
  long nacts = 0;
  if (std::fscanf(f, " acts %ld", &nacts) != 1 || nacts < 0 || nacts > (1L << 31))
    fail("%s: no activity count", argv[2]);
  std::vector<Act> acts(nacts);
  for (long i = 0; i < nacts; i++) {
    char kind = 0;
    if (std::fscanf(f, " %c", &kind) != 1)
      fail("%s: activity %ld missing", argv[2], i);
    Act& a = acts[i];
    if (kind == 'e') {
      long h;
      if (std::fscanf(f, "%ld %lf", &h, &a.amount) != 2 || h < 0 || h >= nhosts || !(a.amount >= 0))
        fail("%s: activity %ld: bad exec", argv[2], i);
      a.comm = false;
      a.src  = static_cast<int>(h);
    } else if (kind == 'c') {
      long s, d;
      if (std::fscanf(f, "%ld %ld %lf", &s, &d, &a.amount) != 3 || s < 0 || s >= nhosts || d < 0 || d >= nhosts ||
          !(a.amount >= 0))
        fail("%s: activity %ld: bad comm", argv[2], i);
      a.comm = true;
      a.src  = static_cast<int>(s);
      a.dst  = static_cast<int>(d);
    } else {
      fail("%s: activity %ld: unknown kind '%c'", argv[2], i, kind);
    }
  }
  // The dependencies are kept here, not as SimGrid's (Activity::add_successor): an activity is
  // created only when its predecessors have finished. SimGrid 3.32 keeps every exec created
  // outside an actor in one list that each exec's end searches, which is quadratic when the
  // whole schedule is created up front.
  long ndeps = 0;
  if (std::fscanf(f, " deps %ld", &ndeps) != 1 || ndeps < 0)
    fail("%s: no dependency count", argv[2]);
  std::vector<std::pair<int, int>> deps(ndeps);
  std::vector<int> pending(nacts);
  std::vector<long> first(nacts + 1);
  for (long i = 0; i < ndeps; i++) {
    long a, b;
    if (std::fscanf(f, "%ld %ld", &a, &b) != 2 || a < 0 || a >= nacts || b < 0 || b >= nacts || a == b)
      fail("%s: dependency %ld: bad", argv[2], i);
    deps[i] = {static_cast<int>(a), static_cast<int>(b)};
    first[a + 1]++;
    pending[b]++;
  }
  std::fclose(f);

  for (long i = 0; i < nacts; i++)
    first[i + 1] += first[i];
  std::vector<int> succ(ndeps);
  {
    std::vector<long> at(first.begin(), first.end() - 1);
    for (auto const& d : deps)
      succ[at[d.first]++] = d.second;
    deps = {};
  }

  // Activities are run by worker actors: a worker takes an activity that can start, starts it,
  // waits for it, hands its successors that can now start to the workers, and takes the next.
  // A worker is created whenever an activity can start and none is idle, so no activity ever
  // waits for a worker. Not without actors (maestro) nor with a few: SimGrid 3.32 keeps the
  // activities an actor started in one list that each activity's end searches, which is
  // quadratic in the activities running at once (minutes at 16,384 ranks exchanging).
  long finished = 0;
  long last     = -1;
  std::deque<int> queue;
  long idle = 0, waking = 0, workers = 0;
  bool over         = false;
  auto sem          = sg4::Semaphore::create(0);
  std::function<void()> worker;
  auto push = [&](int i) {
    queue.push_back(i);
    if (idle - waking > 0) {
      waking++;
      sem->release();
    } else {
      workers++;
      sg4::Actor::create("worker", hosts[acts[i].src], worker);
    }
  };
  worker = [&]() {
    for (;;) {
      if (not queue.empty()) {
        int i = queue.front();
        queue.pop_front();
        const Act& a = acts[i];
        if (a.comm)
          sg4::Comm::sendto_init(hosts[a.src], hosts[a.dst])->set_payload_size(static_cast<uint64_t>(a.amount))->wait();
        else
          sg4::Exec::init()->set_host(hosts[a.src])->set_flops_amount(a.amount)->wait();
        finished++;
        last = i;
        for (long k = first[i]; k < first[i + 1]; k++)
          if (--pending[succ[k]] == 0)
            push(succ[k]);
        if (finished == nacts) {
          over = true;
          for (long k = idle - waking; k > 0; k--) {
            waking++;
            sem->release();
          }
        }
        continue;
      }
      if (over)
        return;
      idle++;
      sem->acquire();
      idle--;
      waking--;
    }
  };
  for (long i = 0; i < nacts; i++)
    if (pending[i] == 0)
      push(static_cast<int>(i));
  e.run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("time %.17g\nfinished %ld of %ld\nlast %ld\nworkers %ld\nwall %.3f\n", sg4::Engine::get_clock(), finished,
              nacts, last, workers, wall);
  std::fflush(stdout);
  return finished == nacts ? 0 : 3;
}
