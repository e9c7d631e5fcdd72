// Trains y = 3x + 1 with the installed library: if this prints "ok", the
// headers, the library and the package config all work from outside.
#include <ddl/ddl.hpp>

#include <cmath>
#include <iostream>

int main() {
  ddl::Generator generator(7);
  const ddl::Tensor x = ddl::uniform({64, 1}, -1.0f, 1.0f, {}, &generator);
  const ddl::Tensor y = x * 3.0f + 1.0f;
  ddl::Tensor w = ddl::zeros({1, 1}, ddl::TensorOptions{}.with_requires_grad());
  ddl::Tensor b = ddl::zeros({1}, ddl::TensorOptions{}.with_requires_grad());
  for (int step = 0; step < 200; ++step) {
    const ddl::Tensor loss = ddl::mean(ddl::pow(ddl::matmul(x, w) + b - y, 2.0f));
    w.zero_grad();
    b.zero_grad();
    loss.backward();
    const ddl::NoGradGuard no_grad;
    w = (w - w.grad() * 0.5f).detach().set_requires_grad();
    b = (b - b.grad() * 0.5f).detach().set_requires_grad();
  }
  const bool ok = std::abs(w.item() - 3.0f) < 1e-3f && std::abs(b.item() - 1.0f) < 1e-3f;
  std::cout << "w=" << w.item() << " b=" << b.item() << (ok ? " ok" : " WRONG") << '\n';
  return ok ? 0 : 1;
}
