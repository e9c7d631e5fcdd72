# The module graph (docs/ARCHITECTURE.md): core <- layers <- optim <- parallel,
# and models on core, layers and optim only, as each module's declared
# dependencies. The build enforces it (each module is an object library whose
# include path holds only itself and what it depends on, so a forbidden
# #include does not compile), and the test module_graph.includes checks every
# source's include lines against it, CUDA sources too, which a build without
# CUDA never compiles.
set(DDL_MODULES core layers optim parallel models)
set(DDL_MODULE_DEPENDS_core "")
set(DDL_MODULE_DEPENDS_layers core)
set(DDL_MODULE_DEPENDS_optim core layers)
set(DDL_MODULE_DEPENDS_parallel core layers optim)
set(DDL_MODULE_DEPENDS_models core layers optim)
# Headers private to their module: no other module may include them.
set(DDL_MODULE_PRIVATE_HEADERS core/ops/helpers.hpp parallel/communication/mpi_internal.hpp)
