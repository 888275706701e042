"""The Muon network-on-chip: flit layouts, routers, the mesh and the reservation arbiter."""
