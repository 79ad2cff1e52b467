#include "config.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/types.hpp"
#include "params.hpp"

namespace vbagg::cli {

namespace {

namespace fs = std::filesystem;

std::string where(const std::string& source, const YAML::Node& node) {
  if (source.rfind("--set", 0) == 0) return source;
  const auto m = node.Mark();
  if (m.line < 0) return source;
  return source + ":" + std::to_string(m.line + 1);
}

std::vector<std::string> split(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream ss(key);
  std::string p;
  while (std::getline(ss, p, '.')) parts.push_back(p);
  return parts;
}

// The section keys known below a prefix ("model." -> likelihood, link, kernel, ...).
std::vector<std::string> children(const std::string& prefix) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& p : all_params()) {
    if (p.key.rfind(prefix, 0) != 0) continue;
    const std::string rest = p.key.substr(prefix.size());
    const std::string first = rest.substr(0, rest.find('.'));
    if (seen.insert(first).second) out.push_back(first);
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

void check_sources(const Param& p, const YAML::Node& v, const std::string& source);

// Checks one value against its parameter; throws ConfigError naming file, line and key.
// Text settings that also read as a YAML list of texts: periods (data.time: [2019-01, 2019-06])
// and spans; the separator their text form uses between entries (none for other settings).
const char* list_separator(const std::string& key) {
  if (key == "data.time" || key == "train.holdout.periods") return ", ";
  if (key == "predict.spans") return "; ";
  return nullptr;
}

void check_value(const Param& p, const YAML::Node& v, const std::string& source) {
  const std::string head = where(source, v) + ": " + p.key;
  auto scalar = [&]() -> std::string {
    if (!v.IsScalar()) throw ConfigError(head + " must be a single " + type_name(p.type) + ", not a list or map");
    return v.Scalar();
  };
  auto number = [&](const YAML::Node& n, const std::string& h) {
    double x;
    try {
      x = n.as<double>();
    } catch (const YAML::Exception&) {
      throw ConfigError(h + " must be a number, got '" + (n.IsScalar() ? n.Scalar() : std::string("a list or map")) +
                        "'");
    }
    if (!(x >= p.min && x <= p.max)) {
      std::ostringstream r;
      r << h << " = " << x << " is out of range [" << p.min << ", " << p.max << "]";
      throw ConfigError(r.str());
    }
    return x;
  };
  switch (p.type) {
    case ParamType::text:
    case ParamType::path:
      if (v.IsSequence() && list_separator(p.key)) {
        for (const auto& e : v)
          if (!e.IsScalar()) throw ConfigError(head + " must be a text or a list of texts");
        return;
      }
      scalar();
      return;
    case ParamType::integer: {
      const std::string s = scalar();
      // An integer setting may also take a listed word (train.polish: auto).
      if (std::find(p.choices.begin(), p.choices.end(), s) != p.choices.end()) return;
      long long x;
      try {
        x = v.as<long long>();
      } catch (const YAML::Exception&) {
        throw ConfigError(head + " must be an integer, got '" + s + "'");
      }
      number(v, head);
      (void)x;
      return;
    }
    case ParamType::real:
      scalar();
      number(v, head);
      return;
    case ParamType::boolean: {
      const std::string s = scalar();
      try {
        v.as<bool>();
      } catch (const YAML::Exception&) {
        throw ConfigError(head + " must be true or false, got '" + s + "'");
      }
      return;
    }
    case ParamType::choice: {
      const std::string s = scalar();
      for (const auto& c : p.choices)
        if (c == s) return;
      throw ConfigError(head + ": '" + s + "' is not allowed (allowed: " + join(p.choices) + ")");
    }
    case ParamType::real_list: {
      if (v.IsScalar() && !v.Scalar().empty()) {  // a single number is a one-element list
        number(v, head);
        return;
      }
      if (!v.IsSequence() && !v.IsNull()) throw ConfigError(head + " must be a list of numbers, e.g. [0.025, 0.975]");
      for (size_t i = 0; v.IsSequence() && i < v.size(); ++i) number(v[i], head + "[" + std::to_string(i) + "]");
      return;
    }
    case ParamType::layer_list: {
      if (!v.IsSequence() || v.size() == 0)
        throw ConfigError(head + " must be a non-empty list of {path, name, resampling, series}");
      const Param* resampling = find_param("data.population.resampling");
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string item = p.key + "[" + std::to_string(i) + "]";
        const YAML::Node e = v[i];
        if (e.IsScalar()) continue;  // a bare path
        if (!e.IsMap())
          throw ConfigError(where(source, e) + ": " + item + " must be a path or a map {path, name, resampling}");
        for (const auto& kv : e) {
          const std::string k = kv.first.Scalar();
          if (k != "path" && k != "name" && k != "resampling" && k != "series")
            throw ConfigError(where(source, kv.first) + ": unknown key '" + item + "." + k +
                              "' (allowed: path, name, resampling, series)");
          if (k == "series" && (!kv.second.IsScalar() || kv.second.Scalar() != "bands"))
            throw ConfigError(where(source, kv.second) + ": " + item +
                              ".series must be 'bands' (one band per period of data.time); a series of files is "
                              "a path with {period}, {year} or {month}");
        }
        if (!e["path"] || !e["path"].IsScalar() || e["path"].Scalar().empty())
          throw ConfigError(where(source, e) + ": " + item + ".path is missing");
        if (e["resampling"]) {
          Param r = *resampling;
          r.key = item + ".resampling";
          check_value(r, e["resampling"], source);
        }
      }
      return;
    }
    case ParamType::source_list:
      check_sources(p, v, source);
      return;
  }
}

// data.sources: a list of maps, each with the data.units.* keys and its own name, likelihood,
// covariates and population.
void check_sources(const Param& p, const YAML::Node& v, const std::string& source) {
  const std::string head = where(source, v) + ": " + p.key;
  if (v.IsNull()) return;
  if (!v.IsSequence()) throw ConfigError(head + " must be a list of sources, each a map {name, path, id_field, ...}");
  std::vector<std::string> allowed = children("data.units.");
  allowed.insert(allowed.end(), kSourceOwnKeys.begin(), kSourceOwnKeys.end());
  std::set<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = p.key + "[" + std::to_string(i) + "]";
    const YAML::Node e = v[i];
    if (!e.IsMap()) throw ConfigError(where(source, e) + ": " + item + " must be a map {name, path, id_field, ...}");
    for (const auto& kv : e) {
      const std::string k = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
        throw ConfigError(where(source, kv.first) + ": unknown key '" + item + "." + k +
                          "' (allowed: " + join(allowed) + ")");
      Param sub;
      if (k == "name") {
        sub = {item + ".name", ParamType::text, "", {}, -1e308, 1e308, ""};
      } else if (k == "likelihood") {
        sub = *find_param("model.likelihood");
      } else if (k == "link") {
        sub = *find_param("model.link");
      } else if (k == "task") {
        sub = {item + ".task", ParamType::text, "", {}, -1e308, 1e308, ""};
      } else if (k == "covariates") {
        sub = *find_param("data.covariates");
      } else if (k == "population") {
        if (!kv.second.IsMap() || !kv.second["path"])
          throw ConfigError(where(source, kv.second) + ": " + item + ".population must be a map {path, resampling}");
        for (const auto& pk : kv.second) {
          const std::string key = pk.first.Scalar();
          const Param* pp = find_param("data.population." + key);
          if (!pp)
            throw ConfigError(where(source, pk.first) + ": unknown key '" + item + ".population." + key +
                              "' (allowed: path, resampling)");
          Param q = *pp;
          q.key = item + ".population." + key;
          check_value(q, pk.second, source);
        }
        continue;
      } else {
        sub = *find_param("data.units." + k);
      }
      sub.key = item + "." + k;
      check_value(sub, kv.second, source);
    }
    for (const char* required : {"path", "id_field", "response_field"})
      if (!e[required] || e[required].Scalar().empty())
        throw ConfigError(where(source, e) + ": " + item + "." + required + " is required (" +
                          find_param(std::string("data.units.") + required)->help + ")");
    if (v.size() > 1 && (!e["name"] || e["name"].Scalar().empty()))
      throw ConfigError(where(source, e) + ": " + item +
                        ".name is required: several sources are told apart by their names");
    if (e["name"] && !names.insert(e["name"].Scalar()).second)
      throw ConfigError(where(source, e["name"]) + ": " + item + ".name '" + e["name"].Scalar() +
                        "' is used by an earlier source");
  }
}

// Walks the user's tree: every leaf must be a known key (layer lists are leaves).
void check_tree(const YAML::Node& node, const std::string& prefix, const std::string& source) {
  if (!node.IsMap()) {
    if (prefix.empty())
      throw ConfigError(source + ": the configuration must be a map of sections (data, model, train, ...)");
    throw ConfigError(where(source, node) + ": '" + prefix.substr(0, prefix.size() - 1) +
                      "' must be a section with keys: " + join(children(prefix)));
  }
  for (const auto& kv : node) {
    const std::string key = prefix + kv.first.Scalar();
    if (const Param* p = find_param(key)) {
      check_value(*p, kv.second, source);
      continue;
    }
    if (children(key + ".").empty()) {
      const std::string section = prefix.empty() ? "the top level" : "'" + prefix.substr(0, prefix.size() - 1) + "'";
      throw ConfigError(where(source, kv.first) + ": unknown key '" + key + "' (allowed in " + section + ": " +
                        join(children(prefix)) + ")");
    }
    check_tree(kv.second, key + ".", source);
  }
}

// yaml-cpp's Node::operator= writes through to the referenced node; reset() rebinds instead.
YAML::Node lookup(const YAML::Node& root, const std::string& key) {
  YAML::Node n;
  n.reset(root);
  for (const auto& part : split(key)) {
    if (!n.IsMap() || !n[part]) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node child = n[part];
    n.reset(child);
  }
  return n;
}

void assign(YAML::Node& root, const std::string& key, const YAML::Node& value) {
  const auto parts = split(key);
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsMap()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(chain.back()[parts[i]]);
    }
    chain.push_back(next);
  }
  chain.back()[parts.back()] = value;
}

// Whether the tree gives data.sources (a non-empty list), which replaces data.units.
bool lists_sources(const YAML::Node& root) {
  const YAML::Node sources = lookup(root, "data.sources");
  return sources && sources.IsSequence() && sources.size() > 0;
}

}  // namespace

Config Config::load(const std::string& path, const std::vector<std::string>& overrides, RequiredData required) {
  if (path.empty()) return parse("", "", fs::current_path().string(), overrides, required);
  if (!fs::exists(path)) throw ConfigError("config file '" + path + "' does not exist");
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path, fs::absolute(fs::path(path)).parent_path().string(), overrides, required);
}

Config Config::parse(const std::string& text, const std::string& source, const std::string& base_dir,
                     const std::vector<std::string>& overrides, RequiredData required) {
  Config c;
  c.root_ = YAML::Node(YAML::NodeType::Map);
  c.source_ = source;
  c.base_dir_ = base_dir;
  if (!source.empty()) {
    try {
      c.root_ = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      throw ConfigError(source + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
    } catch (const YAML::Exception& e) {
      throw ConfigError("cannot read config file '" + source + "': " + e.what());
    }
    if (c.root_.IsNull()) c.root_ = YAML::Node(YAML::NodeType::Map);
    check_tree(c.root_, "", source);
  }
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("--set " + o + ": expected KEY=VALUE, e.g. --set model.link=square");
    c.set(o.substr(0, eq), o.substr(eq + 1));
  }
  const bool has_sources = lists_sources(c.root_);
  if (has_sources && lookup(c.root_, "data.units"))
    throw ConfigError((c.source_.empty() ? std::string("the configuration") : c.source_) +
                      ": give data.units (one source) or data.sources (a list), not both");
  for (const auto& p : all_params()) {
    if (lookup(c.root_, p.key)) continue;
    const bool is_units = p.key.rfind("data.units.", 0) == 0;
    if (is_units && has_sources) continue;  // each source gives its own
    if (p.default_yaml.empty()) {
      const bool is_data = p.key.rfind("data.", 0) == 0;
      if ((required == RequiredData::all && is_data) || (required == RequiredData::not_units && is_data && !is_units))
        throw ConfigError((c.source_.empty() ? std::string("the configuration") : c.source_) + ": " + p.key +
                          " is required (" + p.help + ")");
      continue;
    }
    assign(c.root_, p.key, YAML::Load(p.default_yaml));
  }
  return c;
}

Config Config::from_node(const YAML::Node& resolved, const std::string& base_dir, const std::string& source) {
  Config c;
  c.root_ = YAML::Clone(resolved);
  c.base_dir_ = base_dir;
  c.source_ = source;
  check_tree(c.root_, "", source);
  // Settings added since the configuration was saved take their defaults (data.units' not when
  // data.sources replaces it).
  const bool has_sources = lists_sources(c.root_);
  for (const auto& p : all_params()) {
    if (has_sources && p.key.rfind("data.units.", 0) == 0) continue;
    if (!p.default_yaml.empty() && !lookup(c.root_, p.key)) assign(c.root_, p.key, YAML::Load(p.default_yaml));
  }
  return c;
}

void Config::set(const std::string& key, const std::string& yaml_value) {
  const Param* p = find_param(key);
  if (!p) {
    const auto dot = key.rfind('.');
    const std::string prefix = dot == std::string::npos ? "" : key.substr(0, dot + 1);
    throw ConfigError("--set " + key + ": unknown key" +
                      (children(prefix).empty() ? std::string()
                                                : " (allowed in '" + prefix.substr(0, prefix.size() - 1) +
                                                      "': " + join(children(prefix)) + ")"));
  }
  YAML::Node v;
  try {
    v = YAML::Load(yaml_value);
  } catch (const YAML::Exception& e) {
    throw ConfigError("--set " + key + "=" + yaml_value + ": not a valid value: " + e.what());
  }
  if (v.IsNull() && (p->type == ParamType::text || p->type == ParamType::path)) v = YAML::Node(yaml_value);
  check_value(*p, v, "--set " + key + "=" + yaml_value);  // where() keeps a --set source as it is
  assign(root_, key, v);
}

std::string Config::text(const std::string& key) const {
  const YAML::Node n = lookup(root_, key);
  if (n && n.IsSequence() && list_separator(key)) {
    std::string joined;
    for (const auto& e : n) joined += (joined.empty() ? "" : list_separator(key)) + e.as<std::string>();
    return joined;
  }
  return n && !n.IsNull() ? n.as<std::string>() : std::string();
}

double Config::real(const std::string& key) const { return lookup(root_, key).as<double>(); }
long long Config::integer(const std::string& key) const { return lookup(root_, key).as<long long>(); }
bool Config::boolean(const std::string& key) const { return lookup(root_, key).as<bool>(); }

std::vector<double> Config::reals(const std::string& key) const {
  const YAML::Node n = lookup(root_, key);
  std::vector<double> out;
  if (!n || n.IsNull()) return out;
  if (n.IsScalar()) return {n.as<double>()};
  for (const auto& e : n) out.push_back(e.as<double>());
  return out;
}

std::string Config::path(const std::string& key) const {
  const std::string p = text(key);
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(base_dir_) / p).lexically_normal().string();
}

namespace {

// `path` (absolute) relative to the folder `dir` when both lie under one top-level folder
// (/home/..., /data/...), else as it is: a path into another tree would not move with the run.
std::string portable_path(const std::string& path, const std::string& dir) {
  if (dir.empty()) return path;
  const fs::path p = fs::path(path).lexically_normal(), d = fs::absolute(dir).lexically_normal();
  auto top = [](const fs::path& x) {
    auto it = x.begin();
    return it == x.end() || ++it == x.end() ? fs::path() : *it;  // the component after the root
  };
  if (top(p).empty() || top(p) != top(d)) return path;
  const fs::path rel = p.lexically_relative(d);
  return rel.empty() ? path : rel.string();
}

}  // namespace

YAML::Node Config::resolved_node(const std::string& relative_to) const {
  YAML::Node r = YAML::Clone(root_);
  for (const auto& p : all_params()) {
    if (p.type != ParamType::path) continue;
    if (lookup(r, p.key) && !text(p.key).empty()) assign(r, p.key, YAML::Node(portable_path(path(p.key), relative_to)));
  }
  // Paths inside lists: covariate layers, and each source's units, covariates and population.
  auto resolve = [&](YAML::Node holder, const char* key) {
    if (!holder[key] || !holder[key].IsScalar()) return;
    std::string p = holder[key].as<std::string>();
    if (p.empty()) return;
    if (!fs::path(p).is_absolute()) p = (fs::path(base_dir_) / p).lexically_normal().string();
    holder[key] = portable_path(p, relative_to);
  };
  auto resolve_layers = [&](YAML::Node covs) {
    for (size_t i = 0; covs && covs.IsSequence() && i < covs.size(); ++i) {
      if (covs[i].IsScalar()) {
        YAML::Node m(YAML::NodeType::Map);
        m["path"] = covs[i].Scalar();
        covs[i] = m;
      }
      resolve(covs[i], "path");
    }
  };
  if (r["data"]) {
    resolve_layers(r["data"]["covariates"]);
    YAML::Node sources = r["data"]["sources"];
    for (size_t i = 0; sources && sources.IsSequence() && i < sources.size(); ++i) {
      YAML::Node e = sources[i];
      resolve(e, "path");
      if (e["covariates"]) resolve_layers(e["covariates"]);
      if (e["population"]) resolve(e["population"], "path");
    }
  }
  return r;
}

std::string Config::resolved_yaml(const std::string& relative_to) const {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << resolved_node(relative_to);
  return std::string(out.c_str()) + "\n";
}

namespace {

std::vector<io::LayerSpec> layers_of(const YAML::Node& covs) {
  std::vector<io::LayerSpec> out;
  for (size_t i = 0; covs && i < covs.size(); ++i) {
    io::LayerSpec l;
    l.path = covs[i]["path"].as<std::string>();
    l.name = covs[i]["name"] ? covs[i]["name"].as<std::string>() : "";
    l.resampling = covs[i]["resampling"] ? covs[i]["resampling"].as<std::string>() : io::kCovariateResampling;
    l.series_bands = covs[i]["series"] && covs[i]["series"].as<std::string>() == "bands";
    out.push_back(l);
  }
  return out;
}

// One entry of data.sources (paths resolved), with the data.units defaults for keys it leaves out.
io::SourceConfig source_of(const YAML::Node& e) {
  auto text = [&](const char* key, const std::string& fallback = "") {
    return e[key] && !e[key].IsNull() ? e[key].as<std::string>() : fallback;
  };
  io::SourceConfig s;
  s.units.name = text("name");
  s.units.likelihood = text("likelihood");
  s.units.path = text("path");
  s.units.layer = text("layer");
  s.units.id_field = text("id_field");
  s.units.response_field = text("response_field");
  s.units.trials_field = text("trials_field");
  s.units.point_buffer = e["point_buffer"] ? e["point_buffer"].as<double>() : -1;
  if (e["covariates"]) s.covariates = layers_of(e["covariates"]);
  if (e["population"]) {
    s.population.path = e["population"]["path"].as<std::string>();
    s.population.name = "population";
    s.population.resampling =
        e["population"]["resampling"] ? e["population"]["resampling"].as<std::string>() : io::kPopulationResampling;
  }
  return s;
}

}  // namespace

io::DataConfig Config::data_config() const {
  io::DataConfig d;
  const YAML::Node resolved = resolved_node();
  d.covariates = layers_of(resolved["data"]["covariates"]);
  d.population = {path("data.population.path"), "population", text("data.population.resampling")};
  if (lists_sources(root_)) {
    const YAML::Node sources = resolved["data"]["sources"];
    for (size_t i = 0; i < sources.size(); ++i) {
      io::SourceConfig s = source_of(sources[i]);
      if (i == 0) {
        if (!s.covariates.empty() || !s.population.path.empty())
          throw ConfigError(
              "data.sources[0] is the primary source: its covariates and population are "
              "data.covariates and data.population (give covariates of its own to later sources only)");
        d.units = s.units;
      } else {
        d.more_sources.push_back(s);
      }
    }
  } else {
    d.units = {path("data.units.path"), text("data.units.layer"), text("data.units.id_field"),
               text("data.units.response_field"), text("data.units.trials_field")};
    d.units.point_buffer = real("data.units.point_buffer");
  }
  const std::string grid = text("data.grid");
  d.grid = grid;
  if (grid != "population") {
    bool is_name = false;
    for (const auto& l : d.covariates) is_name |= l.covariate_name() == grid;
    if (!is_name) d.grid = path("data.grid");
  }
  d.grid_refine = static_cast<int>(integer("data.grid_refine"));
  d.pixel_assignment = io::parse_pixel_assignment(text("data.pixel_assignment"));
  d.coordinates = boolean("data.coordinates");
  d.on_bad_unit = io::parse_bad_unit_policy(text("data.on_bad_unit"));
  const bool predict_missing = io::parse_missing_response_policy(text("data.on_missing_response"));
  d.units.predict_missing = predict_missing;
  for (io::SourceConfig& s : d.more_sources) s.units.predict_missing = predict_missing;
  d.time = io::parse_time_axis(text("data.time"));
  d.units.response_table = path("data.units.response_table");
  d.units.period_field = text("data.units.period_field");
  if (d.time.empty()) {
    if (!d.units.response_table.empty())
      throw ConfigError("data.units.response_table holds responses per period; it needs data.time");
    for (const auto& l : d.covariates)
      if (l.series_bands || io::has_period_tokens(l.path))
        throw ConfigError("covariate '" + l.path + "' is a series (one value per period); it needs data.time");
  }
  return d;
}

}  // namespace vbagg::cli
