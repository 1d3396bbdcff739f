// ParseByteSize: the one size parser (mount options, pfs-sim, the benchmark).
#include "tiering/base/units.h"

#include <catch2/catch.hpp>

namespace tierfs {
namespace {

TEST_CASE("ParseByteSize reads plain numbers and binary units", "[units]") {
  CHECK(ParseByteSize("0") == 0u);
  CHECK(ParseByteSize("512") == 512u);
  CHECK(ParseByteSize("64K") == 64ull << 10);
  CHECK(ParseByteSize("64k") == 64ull << 10);
  CHECK(ParseByteSize("3M") == 3ull << 20);
  CHECK(ParseByteSize("8G") == 8ull << 30);
  CHECK(ParseByteSize("2T") == 2ull << 40);
  CHECK(ParseByteSize("8GiB") == 8ull << 30);
  CHECK(ParseByteSize("8GB") == 8ull << 30);
  CHECK(ParseByteSize("8gb") == 8ull << 30);
  CHECK(ParseByteSize("100KiB") == 100ull << 10);
  CHECK(ParseByteSize("1.5G") == 3ull << 29);
  CHECK(ParseByteSize("0.5K") == 512u);
  CHECK(ParseByteSize("0.3K") == 307u);  // a fraction of a byte is truncated
  CHECK(ParseByteSize("16000000T") == 16000000ull << 40);
}

TEST_CASE("ParseByteSize rejects what is not a size", "[units]") {
  for (const char* bad : {"", "G", "-1", "-1G", "10X", "1e30G", "1e30", "8 G", " 8G", "8GiBs",
                          "8iB", "8B", "inf", "nan", "0x10", "16777216T", "1.8e19"}) {
    INFO(bad);
    CHECK_FALSE(ParseByteSize(bad).has_value());
  }
}

TEST_CASE("Counted says a count with its noun in the right number", "[units]") {
  CHECK(Counted(0, "file") == "0 files");
  CHECK(Counted(1, "file") == "1 file");
  CHECK(Counted(1234567, "file") == "1,234,567 files");
  CHECK(Counted(1, "entry") == "1 entry");
  CHECK(Counted(2, "entry") == "2 entries");
  CHECK(Counted(3, "directory") == "3 directories");
  CHECK(Counted(2, "day") == "2 days");  // a vowel's y stays
  CHECK(Grouped(999) == "999");
  CHECK(Grouped(1000) == "1,000");
}

TEST_CASE("WrapWords cuts at spaces, never between a number and its unit", "[units]") {
  using Lines = std::vector<std::string>;
  CHECK(WrapWords("files under 1 MiB hold most", 14) == Lines{"files under", "1 MiB hold", "most"});
  CHECK(WrapWords("a (12.5 GiB) b", 4) == Lines{"a", "(12.5 GiB)", "b"});
  CHECK(WrapWords("30 files, 1 directory", 12) == Lines{"30 files,", "1 directory"});
  CHECK(WrapWords("short", 100) == Lines{"short"});
  CHECK(WrapWords("averyveryverylongword x", 5) == Lines{"averyveryverylongword", "x"});
}

}  // namespace
}  // namespace tierfs
