// The start every multi-rank strategy needs: the ranks check that they built
// the same model (and optimizer), then take rank 0's parameters, buffers
// and optimizer state, so they start identical whatever their own seeds and
// a resume from rank 0's checkpoint reaches all of them.
#pragma once

#include <ddl/layers/module.hpp>
#include <ddl/optim/optimizer.hpp>
#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::parallel {

// Rank 0's value of `tensor` on every rank, in place (float32 down our
// binomial tree, other dtypes by MPI_Bcast; CUDA tensors through the host).
void broadcast_tensor(const Communicator& comm, const Tensor& tensor);

// Agreement, then rank 0's state everywhere; `optimizer` may be null.
// `who` names the strategy in the abort message of a disagreement.
void broadcast_initial_state(const Communicator& comm, layers::Module& model, optim::Optimizer* optimizer,
                             const std::string& who);

}  // namespace ddl::parallel
