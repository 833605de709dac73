/*
 * zone.cpp: the simulated cluster in one SimGrid zone of rehearsal's own.  Its hosts and links are
 * those a zone per node gave (platform.c's XML: hosts gpu<slot>, each with its private link
 * node<n>_link_<slot>, a node's backbone node<n>_backbone, its uplink node<n>-uplink, the launcher),
 * created in the same order, so SimGrid's solver sees the same resources; a route is worked out
 * from the two GPUs' nodes when a message asks for it, with its links in the XML's order and its
 * latency summed in the order SimGrid's hierarchical routing summed it (the network's hops from the
 * far end back, then the source node's, then the destination node's): the same numbers to the
 * bit.  One zone means each name SimGrid checks for uniqueness is looked up once, not in every
 * zone, and the seal walks the hosts once: O(hosts) where a zone per node was hosts x nodes.
 *
 * The fat-tree and rail fabrics add leaves: a node's uplink (fat_tree) or its NIC k (rail, on rail
 * k's leaf) reaches nodes of its own leaf through the leaf alone, and other leaves through the
 * leaf's uplinks to the spines, one split-duplex link per leaf for all its spine ports (the spines
 * spread the flows over their ports: adaptive routing, no hash collisions).  Rail routes take the
 * destination GPU's rail, as NCCL's PXN does: the data crosses to the GPU of that rail over the
 * node's own fabric, and the rails never meet below the spines.
 */
#include "zone.h"

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using simgrid::kernel::routing::NetPoint;
using simgrid::kernel::routing::NetZoneImpl;
using simgrid::kernel::routing::Route;
using simgrid::s4u::Link;

using simgrid::kernel::resource::StandardLinkImpl;

/* A link and its kernel side, found once: s4u's get_impl() is a dynamic_cast, and a route is
 * worked out for every message (5% of a run's time when asked each time). */
struct Hop {
  Link* link             = nullptr;
  StandardLinkImpl* impl = nullptr;
  Hop() = default;
  explicit Hop(Link* l) : link(l), impl(l ? l->get_impl() : nullptr) {}
  explicit operator bool() const { return link != nullptr; }
};

struct Duplex {
  Hop up;
  Hop down;
};

class GpuCluster final : public NetZoneImpl {
public:
  GpuCluster(const std::string& name, const rh_zone_spec& spec) : NetZoneImpl(name), spec_(spec) {}

  void build(); /* reads spec_'s arrays, the caller's, and forgets them */
  void get_local_route(const NetPoint* src, const NetPoint* dst, Route* route, double* latency) override;

private:
  rh_zone_spec spec_;
  std::vector<int> slot_of_vertex_; /* a netpoint's id -> its GPU slot; -1: the launcher */
  std::vector<int> node_of_slot_, local_of_slot_;
  std::vector<Duplex> gpu_link_;    /* per slot */
  std::vector<Hop> backbone_;       /* per node; empty: none */
  std::vector<Duplex> port_;        /* per node and rail */
  std::vector<Duplex> leaf_;        /* per leaf and rail */

  int slot(const NetPoint* p) const
  {
    return p->id() < slot_of_vertex_.size() ? slot_of_vertex_[p->id()] : -1;
  }
  void build_nodes();
  void build_network();
  int network_hops(int s, int d, Hop* hops) const;
};

Duplex split_duplex(NetZoneImpl* z, const std::string& name, double bw, double lat)
{
  auto* l = z->create_split_duplex_link(name, {bw});
  l->set_latency(lat)->seal();
  return {Hop(l->get_link_up()), Hop(l->get_link_down())};
}

void GpuCluster::build()
{
  build_nodes();
  spec_.gpus   = nullptr;
  spec_.speeds = nullptr;
  if (spec_.nodes > 1)
    build_network();
}

/* The GPU hosts, their links and the nodes' backbones, node by node, then the launcher: the XML
 * platform's order. */
void GpuCluster::build_nodes()
{
  std::vector<double> speeds(spec_.speeds, spec_.speeds + spec_.nspeeds);
  backbone_.assign(spec_.nodes, Hop());
  for (int n = 0, slot = 0; n < spec_.nodes; n++) {
    if (spec_.backbone_bw > 0)
      backbone_[n] = Hop(create_link("node" + std::to_string(n) + "_backbone", {spec_.backbone_bw})
                             ->set_sharing_policy(Link::SharingPolicy::SHARED)
                             ->set_latency(0)
                             ->seal());
    for (int g = 0; g < spec_.gpus[n]; g++, slot++) {
      const auto* host = create_host("gpu" + std::to_string(slot), speeds)->set_core_count(1)->seal();
      unsigned long id = host->get_netpoint()->id();
      if (slot_of_vertex_.size() <= id)
        slot_of_vertex_.resize(id + 1, -1);
      slot_of_vertex_[id] = slot;
      node_of_slot_.push_back(n);
      local_of_slot_.push_back(g);
      gpu_link_.push_back(split_duplex(this, "node" + std::to_string(n) + "_link_" + std::to_string(slot),
                                       spec_.intra_bw, spec_.intra_lat));
    }
  }
  create_host("launcher", {1.0})->seal(); /* the driver's and the injector's: it sends nothing */
}

/* The nodes' ports (an uplink, or a NIC per rail), then the leaves' uplinks to the spines. */
void GpuCluster::build_network()
{
  for (int n = 0; n < spec_.nodes; n++)
    for (int r = 0; r < spec_.rails; r++)
      port_.push_back(split_duplex(this,
                                   spec_.rails > 1 ? "node" + std::to_string(n) + "-nic" + std::to_string(r)
                                                   : "node" + std::to_string(n) + "-uplink",
                                   spec_.port_bw, spec_.nic_lat));
  for (int l = 0; l < spec_.leaves; l++)
    for (int r = 0; r < spec_.rails; r++)
      leaf_.push_back(split_duplex(this,
                                   "leaf" + std::to_string(l) + (spec_.rails > 1 ? "-rail" + std::to_string(r) : "") +
                                       "-spines",
                                   spec_.leaf_bw, spec_.nic_lat));
}

/* The links of the network between GPU slots s and d on different nodes, in path order, where the
 * fabric's routing (the spec's route) says: the ports of d's rail on both nodes (PXN), and the
 * spines' between leaves. */
int GpuCluster::network_hops(int s, int d, Hop* hops) const
{
  rh_zone_path p = spec_.route(spec_.cluster, node_of_slot_[s], node_of_slot_[d], local_of_slot_[d]);
  int k = 0;
  hops[k++] = port_[p.out].up;
  if (p.leaf_out >= 0) {
    hops[k++] = leaf_[p.leaf_out].up;
    hops[k++] = leaf_[p.leaf_in].down;
  }
  hops[k++] = port_[p.in].down;
  return k;
}

void GpuCluster::get_local_route(const NetPoint* src, const NetPoint* dst, Route* route, double* latency)
{
  int s = slot(src), d = slot(dst);
  if (s < 0 || d < 0)
    throw std::invalid_argument("no route from " + src->get_name() + " to " + dst->get_name());
  int a = node_of_slot_[s], b = node_of_slot_[d];
  auto& links = route->link_list_;
  auto add    = [latency](const Hop& h) {
    if (latency)
      *latency += h.link->get_latency();
  };
  if (a == b) { /* through the node's switch (and its backbone) */
    for (const Hop* h : {&gpu_link_[s].up, &backbone_[a], &gpu_link_[d].down})
      if (*h) {
        links.push_back(h->impl);
        add(*h);
      }
    return;
  }
  Hop hops[4];
  int n = network_hops(s, d, hops);
  for (const Hop* h : {&gpu_link_[s].up, &backbone_[a]})
    if (*h)
      links.push_back(h->impl);
  for (int i = 0; i < n; i++)
    links.push_back(hops[i].impl);
  for (const Hop* h : {&backbone_[b], &gpu_link_[d].down})
    if (*h)
      links.push_back(h->impl);
  for (int i = n - 1; i >= 0; i--)
    add(hops[i]);
  for (const Hop* h : {&gpu_link_[s].up, &backbone_[a], &backbone_[b], &gpu_link_[d].down})
    if (*h)
      add(*h);
}

} // namespace

extern "C" sg_link_t rh__zone_link(const char* name)
{
  return Link::by_name_or_null(name);
}

extern "C" int rh__zone_build(const rh_zone_spec* spec, char* err, size_t len)
{
  try {
    auto* zone = new GpuCluster("cluster", *spec); /* the first zone is the platform's root */
    zone->build();
    zone->seal();
    simgrid::s4u::Engine::on_platform_created();
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, len, "cannot build the simulated cluster: %s", e.what());
    return -1;
  }
}
