// Listing names for what an importer brings in: models from other frameworks name tensors with
// characters a listing cannot spell ("layer0/W:0", "input.1" is fine, "1x" is not), so each
// foreign name gets a listing name — itself when it is valid and free, otherwise a fixed spelling
// of it — and no two foreign names share one. Shared by the flow and ONNX importers.
#pragma once
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace nnasm {

class ImportNames {
 public:
  // The listing name of `foreign`, the same on every call. A name that is not a listing name
  // ([A-Za-z_][A-Za-z0-9_.]*) has every other character replaced by '_' and, when it starts with
  // a digit or '.', a '_' in front; a name already given out gets "_2", "_3", ... appended. The
  // result depends only on the order of first calls, so an importer that maps its names in file
  // order names the same model the same way every time.
  const std::string& map(const std::string& foreign);
  // A name no map() or fresh() call has given out: `base` (spelled as map spells it), else with
  // "_2", "_3", ... appended. For values an importer makes up (an intermediate of a node that
  // becomes two instructions); map every foreign name first, so none of them gets it later.
  std::string fresh(const std::string& base);
  // Whether map() or fresh() gave out `listing_name` (an importer's own temporaries avoid it).
  bool taken(const std::string& listing_name) const { return taken_.count(listing_name) > 0; }

 private:
  std::string unique(std::string name);
  std::unordered_map<std::string, std::string> mapped_;
  std::unordered_set<std::string> taken_;
};

}  // namespace nnasm
