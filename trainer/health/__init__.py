"""GPU node health: what the DCGM exporter's series say of a node, the controller that cordons failing nodes, and the pre-job node check."""
