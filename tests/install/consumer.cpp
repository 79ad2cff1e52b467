// Simulates a small country with vbagg::core and parses a model file's error with vbagg::io:
// prints the number of units and their total count, then the io error.
#include <iostream>

#include "core/country.hpp"
#include "core/types.hpp"
#include "io/model_file.hpp"

int main() {
  vbagg::CountryOptions o;
  o.width = 20;
  o.height = 16;
  o.units = 12;
  const vbagg::Country c = vbagg::make_country(o);
  std::cout << "units " << c.counts.size() << " total " << c.counts.sum() << "\n";
  try {
    vbagg::io::parse_model_file("format: something-else\n", "in-memory");
  } catch (const vbagg::DataError& e) {
    std::cout << "io: " << e.what() << "\n";
  }
  return c.counts.size() == 12 ? 0 : 1;
}
