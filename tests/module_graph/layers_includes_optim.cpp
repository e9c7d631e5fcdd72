// Compiled with layers/'s include path by the test module_graph.forbidden,
// which passes only if this fails to compile for want of the header: the
// engine is above layers/ in the module graph, so layers/ cannot see it.
#include <ddl/optim/engine/trainer.hpp>
