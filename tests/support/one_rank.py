"""A modelzip.distributed group of one process, for the tests that exercise the
collective commit's own logic without an MPI or torch engine
(tests/python, tests/format/spec_impl)."""
import modelzip.distributed


class OneRank(modelzip.distributed.Communicator):
    """A group of one process (no engine): the collective commit's own logic."""

    def rank(self):
        return 0

    def size(self):
        return 1

    def gather(self, data, root):
        return [data]

    def broadcast(self, data, root):
        return data

    def agree(self, error):
        return (0, error) if error else None
