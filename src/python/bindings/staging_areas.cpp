#include "staging_areas.hpp"

#include <cstdint>
#include <string>

#include <pybind11/numpy.h>

#include "checkpoint/staging_area.hpp"

namespace modelzip::python {

// Owns a lease of staging memory; its first `size` bytes are exported as a
// writable buffer (PEP 3118), and watched by a FillGate.
class PyStagingArea {
 public:
  PyStagingArea(std::size_t size, bool keep)
      : lease_(std::make_shared<detail::StagingLease>(size, keep)),
        size_(size),
        gate_(
            std::make_shared<detail::FillGate>(std::span<const std::byte>(lease_->data(), size))) {}
  std::byte* data() const noexcept { return lease_->data(); }
  std::size_t size() const noexcept { return size_; }
  Bytes adopt(bool keep) const {
    lease_->set_keep(keep);
    return Bytes::borrow({lease_->data(), size_}, lease_);
  }
  const std::shared_ptr<detail::FillGate>& gate() const noexcept { return gate_; }

 private:
  std::shared_ptr<detail::StagingLease> lease_;
  std::size_t size_;
  std::shared_ptr<detail::FillGate> gate_;
};

}  // namespace modelzip::python

MODELZIP_PY_INITIALIZED_CASTER(modelzip::python::PyStagingArea)

namespace modelzip::python {

std::vector<Bytes> adopted_areas(const py::handle& areas, bool keep_staging) {
  std::vector<Bytes> out;
  for (py::handle area : areas)
    out.push_back(area.cast<const PyStagingArea&>().adopt(keep_staging));
  return out;
}

std::vector<std::shared_ptr<const detail::FillGate>> fill_gates(const py::handle& areas) {
  std::vector<std::shared_ptr<const detail::FillGate>> out;
  for (py::handle area : areas) out.push_back(area.cast<const PyStagingArea&>().gate());
  return out;
}

void bind_staging_areas(py::module_& m) {
  py::class_<PyStagingArea>(m, "_StagingArea",
                            "Staging memory a save adopts or writes from (_device_save.py).")
      .def(py::init<std::size_t, bool>(), py::arg("size"), py::arg("keep") = true,
           "At least `size` bytes of staging memory (from the pool of idle staging buffers); "
           "`keep`: back to that pool at the end (else freed; a save that adopts it decides).")
      .def("__len__", &PyStagingArea::size)
      .def(
          "array",
          [](const py::object& self) {
            const auto& a = self.cast<const PyStagingArea&>();
            return py::array_t<std::uint8_t>({static_cast<py::ssize_t>(a.size())},
                                             reinterpret_cast<std::uint8_t*>(a.data()), self);
          },
          "The memory as a writable uint8 numpy array (which keeps this area alive).")
      .def(
          "filled",
          [](const PyStagingArea& a, std::size_t offset, std::size_t n) {
            a.gate()->filled(offset, n);
          },
          py::arg("offset"), py::arg("n"),
          "Bytes [offset, offset + n) are final: a commit waiting for them may read them.")
      .def(
          "fail", [](const PyStagingArea& a, std::string message) { a.gate()->fail(message); },
          py::arg("message"),
          "The filling stopped: a commit waiting for bytes not filled fails with `message`.");
}

}  // namespace modelzip::python
