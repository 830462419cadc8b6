<?xml version="1.0" encoding="utf-8"?>
<!-- Tables shaped like SIMBAD's basic / ident / ref / has_ref, in schema "public" so ADQL names
     them unqualified as on SIMBAD's own TAP service (object_papers' query runs unchanged). The
     bibcodes' metadata is in the ADS fake's corpus (tests/data/ads/corpus.json), except the one
     ADS does not know. -->
<resource schema="public">
  <meta name="title">astro-jupyter SIMBAD-shaped test tables</meta>
  <meta name="description">A few objects and their references.</meta>
  <meta name="creationDate">2026-12-03T00:00:00</meta>
  <meta name="subject">Bibliography</meta>
  <table id="basic" onDisk="True" adql="True">
    <meta name="description">Objects (as SIMBAD's basic).</meta>
    <column name="oid" type="bigint" ucd="meta.record;meta.id" description="Object internal id"/>
    <column name="main_id" type="text" ucd="meta.id;meta.main" description="Main identifier"/>
    <column name="ra" type="double precision" unit="deg" ucd="pos.eq.ra;meta.main" description="Right ascension"/>
    <column name="dec" type="double precision" unit="deg" ucd="pos.eq.dec;meta.main" description="Declination"/>
    <column name="otype" type="text" ucd="src.class" description="Object type"/>
  </table>
  <table id="ident" onDisk="True" adql="True">
    <meta name="description">Identifiers (as SIMBAD's ident).</meta>
    <column name="oidref" type="bigint" ucd="meta.record;meta.id" description="Object internal id"/>
    <column name="id" type="text" ucd="meta.id" description="Identifier"/>
  </table>
  <table id="ref" onDisk="True" adql="True">
    <meta name="description">Bibliographic references (as SIMBAD's ref).</meta>
    <column name="oidbib" type="bigint" ucd="meta.record;meta.bib" description="Reference internal id"/>
    <column name="bibcode" type="text" ucd="meta.bib.bibcode" description="Bibcode"/>
    <column name="title" type="text" ucd="meta.title" description="Title"/>
    <column name="year" type="smallint" ucd="time.publiYear" description="Year"/>
    <column name="journal" type="text" ucd="meta.bib.journal" description="Journal"/>
    <column name="doi" type="text" ucd="meta.ref.doi" description="DOI"/>
  </table>
  <table id="has_ref" onDisk="True" adql="True">
    <meta name="description">Object-reference links (as SIMBAD's has_ref).</meta>
    <column name="oidref" type="bigint" ucd="meta.record;meta.id" description="Object internal id"/>
    <column name="oidbibref" type="bigint" ucd="meta.record;meta.bib" description="Reference internal id"/>
    <column name="obj_freq" type="smallint" ucd="meta.number" description="Times the object is cited in the paper"/>
  </table>

  <data id="import_basic">
    <sources item="basic"/>
    <embeddedGrammar>
      <iterator><code>
        for row in [{"oid": 1, "main_id": "M  87", "ra": 187.70593075, "dec": 12.39112331, "otype": "AGN"},
          {"oid": 2, "main_id": "M  31", "ra": 10.684708, "dec": 41.26875, "otype": "GiG"}]:
          yield row
      </code></iterator>
    </embeddedGrammar>
    <make table="basic"/>
  </data>
  <data id="import_ident">
    <sources item="ident"/>
    <embeddedGrammar>
      <iterator><code>
        for row in [{"oidref": 1, "id": "M  87"}, {"oidref": 1, "id": "NGC  4486"}, {"oidref": 2, "id": "M  31"}]:
          yield row
      </code></iterator>
    </embeddedGrammar>
    <make table="ident"/>
  </data>
  <data id="import_ref">
    <sources item="ref"/>
    <embeddedGrammar>
      <iterator><code>
        for row in [{"oidbib": 11, "bibcode": "2019ApJ...873..111I", "title": "LSST: from science drivers",
           "year": 2019, "journal": "ApJ", "doi": "10.3847/1538-4357/ab042c"},
          {"oidbib": 12, "bibcode": "1929PNAS...15..168H", "title": "A relation between distance",
           "year": 1929, "journal": "PNAS", "doi": "10.1073/pnas.15.3.168"},
          {"oidbib": 13, "bibcode": "2030XYZ....1....1Q", "title": "A paper ADS does not know",
           "year": 2030, "journal": "XYZ", "doi": None},
          {"oidbib": 14, "bibcode": "2012A&amp;A...538A...8S", "title": "CALIFA",
           "year": 2012, "journal": "A&amp;A", "doi": None}]:
          yield row
      </code></iterator>
    </embeddedGrammar>
    <make table="ref"/>
  </data>
  <data id="import_has_ref">
    <sources item="has_ref"/>
    <embeddedGrammar>
      <iterator><code>
        for row in [{"oidref": 1, "oidbibref": 11, "obj_freq": 3}, {"oidref": 1, "oidbibref": 12, "obj_freq": 1},
          {"oidref": 1, "oidbibref": 13, "obj_freq": None}, {"oidref": 2, "oidbibref": 14, "obj_freq": 5}]:
          yield row
      </code></iterator>
    </embeddedGrammar>
    <make table="has_ref"/>
  </data>
</resource>
