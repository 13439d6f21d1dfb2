#include "convert_test_support.hpp"
