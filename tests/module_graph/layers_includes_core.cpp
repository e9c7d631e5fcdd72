// Compiled with layers/'s include path by the test module_graph.allowed:
// layers/ may include core/, so this builds (the control for the probe
// beside it).
#include <ddl/core/tensor.hpp>
