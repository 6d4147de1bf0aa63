// The PostgreSQL JDBC driver (pgjdbc) against `ringscan serve`: prepared statements
// with parameters of several Java types, executed past pgjdbc's prepareThreshold (when
// it switches to a named server-side statement and binary results), and again with
// prepareThreshold=1; fetch-size cursors (portals run with a row limit); result-set
// metadata; an error by SQLSTATE; the server's version.
//
// Usage: java -cp postgresql.jar JdbcCheck.java PORT CASES_FILE
//
// CASES_FILE (written by tests/serve_jdbc.rs), one record a line, fields split by tabs:
//   case  LABEL  FETCH_SIZE  EXPECTED_CSV  SQL_WITH_?
//   param TYPE   VALUE           (for the case above; TYPE: string long int double
//                                 timestamp offsetdatetime bigdecimal)
// EXPECTED_CSV is `ringscan query --format csv` of the same SQL with the parameters
// written as literals: a header, then the rows in order.
//
// Prints one `ok ...` line per check; exits 1 at the first failure, saying why.

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

public final class JdbcCheck {
    /** Executions of each prepared statement: past pgjdbc's default prepareThreshold of 5. */
    static final int EXECUTIONS = 7;
    /** Relative tolerance for doubles: aggregates may add in another order. */
    static final double DOUBLE_TOLERANCE = 1e-12;

    record Param(String type, String value) {}

    record Case(String label, int fetchSize, Path expected, String sql, List<Param> params) {}

    static final class CheckFailed extends RuntimeException {
        CheckFailed(String message) {
            super(message);
        }
    }

    /**
     * Counts what pgjdbc's protocol log (FINEST) says it sent and received: Execute
     * messages with a row limit, and PortalSuspended answers. The evidence that a fetch
     * size reads through a portal in pieces rather than all rows at once.
     */
    static final class ProtocolCounter extends Handler {
        /** The row limit whose Executes are counted: the fetch size of the case running. */
        String watchedLimit = "";
        int limitedExecutes;
        int portalsSuspended;

        @Override
        public void publish(LogRecord record) {
            String message = record.getMessage();
            if (message == null) {
                return;
            }
            Object[] p = record.getParameters();
            if (message.contains("FE=> Execute(") && p != null && p.length == 2
                    && watchedLimit.equals(String.valueOf(p[1]))) {
                limitedExecutes++;
            } else if (message.contains("<=BE PortalSuspended")) {
                portalsSuspended++;
            }
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
    }

    /** Held here: java.util.logging keeps loggers only weakly, and with them their level. */
    static final Logger PGJDBC_LOG = Logger.getLogger("org.postgresql");
    static final ProtocolCounter PROTOCOL = new ProtocolCounter();

    static void check(boolean condition, String message) {
        if (!condition) {
            throw new CheckFailed(message);
        }
    }

    /**
     * DatabaseMetaData as GUI tools use it: getTables lists ohlcv in public, getColumns
     * its columns in order with their JDBC and PostgreSQL types (pgjdbc's own catalog
     * queries, answered from the data directory).
     */
    static void checkCatalog(Connection conn) throws SQLException {
        DatabaseMetaData md = conn.getMetaData();
        List<String> tables = new ArrayList<>();
        try (ResultSet rs = md.getTables(null, "public", "%", new String[] {"TABLE"})) {
            while (rs.next()) {
                tables.add(rs.getString("TABLE_SCHEM") + "." + rs.getString("TABLE_NAME") + " "
                        + rs.getString("TABLE_TYPE"));
            }
        }
        check(tables.equals(List.of("public.ohlcv TABLE")), "getTables: " + tables);
        List<String> columns = new ArrayList<>();
        try (ResultSet rs = md.getColumns(null, "public", "ohlcv", "%")) {
            while (rs.next()) {
                columns.add(rs.getInt("ORDINAL_POSITION") + " " + rs.getString("COLUMN_NAME") + " "
                        + rs.getInt("DATA_TYPE") + " " + rs.getString("TYPE_NAME") + " "
                        + rs.getString("IS_NULLABLE"));
            }
        }
        List<String> want = List.of(
                "1 symbol " + Types.VARCHAR + " text NO",
                "2 ts " + Types.TIMESTAMP + " timestamptz NO",
                "3 open " + Types.DOUBLE + " float8 NO",
                "4 high " + Types.DOUBLE + " float8 NO",
                "5 low " + Types.DOUBLE + " float8 NO",
                "6 close " + Types.DOUBLE + " float8 NO",
                "7 volume " + Types.NUMERIC + " numeric NO");
        check(columns.equals(want), "getColumns: " + columns + ", expected " + want);
        List<String> schemas = new ArrayList<>();
        try (ResultSet rs = md.getSchemas()) {
            while (rs.next()) {
                schemas.add(rs.getString("TABLE_SCHEM"));
            }
        }
        check(schemas.contains("public") && schemas.contains("pg_catalog"), "getSchemas: " + schemas);
        System.out.println("ok DatabaseMetaData getTables, getColumns and getSchemas: " + schemas);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: JdbcCheck PORT CASES_FILE");
            System.exit(2);
        }
        // Every wait bounded: connect, login, and each read from the socket.
        String url = "jdbc:postgresql://127.0.0.1:" + Integer.parseInt(args[0])
                + "/ringscan?user=ringscan&connectTimeout=10&loginTimeout=10&socketTimeout=120";
        List<Case> cases = readCases(Path.of(args[1]));
        // FINEST reaches only this handler: the console's stays at INFO.
        PGJDBC_LOG.setLevel(Level.FINEST);
        PGJDBC_LOG.addHandler(PROTOCOL);
        check(!cases.isEmpty(), "no cases in " + args[1]);
        try {
            for (String options : new String[] {"", "&prepareThreshold=1"}) {
                String mode = options.isEmpty() ? "prepareThreshold=5 (default)" : "prepareThreshold=1";
                try (Connection conn = DriverManager.getConnection(url + options)) {
                    for (Case c : cases) {
                        runCase(conn, c, mode);
                    }
                }
            }
            try (Connection conn = DriverManager.getConnection(url)) {
                checkMetadata(conn);
                checkCatalog(conn);
                checkError(conn);
                String version = conn.getMetaData().getDatabaseProductVersion();
                check(version != null && !version.isEmpty(), "empty database product version");
                System.out.println("ok getDatabaseProductVersion: " + version + " ("
                        + conn.getMetaData().getDatabaseProductName() + ", driver "
                        + conn.getMetaData().getDriverVersion() + ")");
            }
        } catch (CheckFailed e) {
            System.err.println("FAILED: " + e.getMessage());
            System.exit(1);
        } catch (SQLException e) {
            System.err.println("FAILED with SQLSTATE " + e.getSQLState() + ": " + e);
            e.printStackTrace();
            System.exit(1);
        }
    }

    static List<Case> readCases(Path file) throws Exception {
        List<Case> cases = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            if (f[0].equals("case") && f.length == 5) {
                cases.add(new Case(f[1], Integer.parseInt(f[2]), Path.of(f[3]), f[4], new ArrayList<>()));
            } else if (f[0].equals("param") && f.length == 3 && !cases.isEmpty()) {
                cases.get(cases.size() - 1).params().add(new Param(f[1], f[2]));
            } else {
                throw new CheckFailed("bad line in " + file + ": " + line);
            }
        }
        return cases;
    }

    static void bind(PreparedStatement stmt, List<Param> params) throws SQLException {
        for (int i = 0; i < params.size(); i++) {
            Param p = params.get(i);
            int at = i + 1;
            switch (p.type()) {
                case "string" -> stmt.setString(at, p.value());
                case "long" -> stmt.setLong(at, Long.parseLong(p.value()));
                case "int" -> stmt.setInt(at, Integer.parseInt(p.value()));
                case "double" -> stmt.setDouble(at, Double.parseDouble(p.value()));
                case "timestamp" -> stmt.setTimestamp(at, Timestamp.from(Instant.parse(p.value())));
                case "offsetdatetime" -> stmt.setObject(at, OffsetDateTime.parse(p.value()));
                case "bigdecimal" -> stmt.setBigDecimal(at, new BigDecimal(p.value()));
                default -> throw new CheckFailed("unknown parameter type " + p.type());
            }
        }
    }

    /**
     * Runs the case's statement EXECUTIONS times on one PreparedStatement (rebinding the
     * parameters each time, as an application would), each answer compared with the
     * expected CSV. With a fetch size, inside a transaction: pgjdbc then reads through a
     * named portal, FETCH_SIZE rows per Execute.
     */
    static void runCase(Connection conn, Case c, String mode) throws Exception {
        List<List<String>> expected = parseCsv(Files.readString(c.expected(), StandardCharsets.UTF_8));
        check(expected.size() > 1, c.label() + ": the expected CSV has no rows");
        List<String> header = expected.get(0);
        List<List<String>> rows = expected.subList(1, expected.size());
        String what = c.label() + " [" + mode + (c.fetchSize() > 0 ? ", fetch size " + c.fetchSize() : "") + "]";
        if (c.fetchSize() > 0) {
            conn.setAutoCommit(false);
        }
        int serverPreparedFrom = 0;
        int binaryFrom = 0;
        String protocol = "";
        PROTOCOL.watchedLimit = String.valueOf(c.fetchSize());
        int limitedExecutesBefore = PROTOCOL.limitedExecutes;
        int portalsSuspendedBefore = PROTOCOL.portalsSuspended;
        try (PreparedStatement stmt = conn.prepareStatement(c.sql())) {
            if (c.fetchSize() > 0) {
                stmt.setFetchSize(c.fetchSize());
            }
            for (int run = 1; run <= EXECUTIONS; run++) {
                bind(stmt, c.params());
                // Whether this execution uses a named server-side statement.
                if (serverPreparedFrom == 0 && stmt.unwrap(org.postgresql.PGStatement.class).isUseServerPrepare()) {
                    serverPreparedFrom = run;
                }
                String where = what + " execution " + run;
                try (ResultSet rs = stmt.executeQuery()) {
                    if (binaryFrom == 0 && anyBinary(rs.getMetaData())) {
                        binaryFrom = run;
                    }
                    compare(where, rs, header, rows);
                } catch (SQLException e) {
                    throw new CheckFailed(where + ": SQLSTATE " + e.getSQLState() + ": " + e);
                }
                stmt.clearParameters();
            }
        }
        if (c.fetchSize() > 0) {
            conn.commit();
            conn.setAutoCommit(true);
            // Each execution: one Execute per piece, every full piece but perhaps the
            // last answered by PortalSuspended (a server may end on an exact multiple
            // with CommandComplete or with one more, empty, Execute).
            int pieces = (rows.size() + c.fetchSize() - 1) / c.fetchSize();
            int executes = PROTOCOL.limitedExecutes - limitedExecutesBefore;
            int suspended = PROTOCOL.portalsSuspended - portalsSuspendedBefore;
            check(executes >= EXECUTIONS * pieces && suspended >= EXECUTIONS * (pieces - 1),
                    what + ": " + executes + " Executes with a row limit of " + c.fetchSize() + " and " + suspended
                    + " PortalSuspended over " + EXECUTIONS + " executions, wanted at least "
                    + EXECUTIONS * pieces + " and " + EXECUTIONS * (pieces - 1)
                    + " (is pgjdbc's protocol log at FINEST?)");
            protocol = ", " + executes + " Executes with a row limit of " + c.fetchSize() + ", " + suspended
                    + " PortalSuspended";
        }
        check(serverPreparedFrom > 0, what + ": pgjdbc never used a server-side prepared statement");
        check(binaryFrom > 0, what + ": no execution had results in binary");
        System.out.println("ok " + what + ": " + rows.size() + " rows x " + EXECUTIONS
                + " executions equal ringscan query's (server-prepared from execution " + serverPreparedFrom
                + ", binary results from execution " + binaryFrom + protocol + ")");
    }

    /** Whether some column of the result came in binary (pgjdbc asks so for named statements). */
    static boolean anyBinary(ResultSetMetaData md) throws SQLException {
        org.postgresql.PGResultSetMetaData pg = md.unwrap(org.postgresql.PGResultSetMetaData.class);
        for (int col = 1; col <= md.getColumnCount(); col++) {
            if (pg.getFormat(col) == 1) {
                return true;
            }
        }
        return false;
    }

    static void compare(String where, ResultSet rs, List<String> header, List<List<String>> rows)
            throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        int columns = md.getColumnCount();
        check(columns == header.size(), where + ": " + columns + " columns, ringscan query " + header.size()
                + " " + header);
        int row = 0;
        while (rs.next()) {
            check(row < rows.size(), where + ": more than the " + rows.size() + " rows ringscan query gave");
            List<String> want = rows.get(row);
            check(want.size() == columns, where + " row " + row + ": expected CSV has " + want.size() + " fields");
            for (int col = 1; col <= columns; col++) {
                String w = want.get(col - 1);
                String mismatch = compareValue(rs, md, col, w);
                check(mismatch == null, where + " row " + row + " column " + col + " (" + md.getColumnLabel(col)
                        + ", " + md.getColumnTypeName(col) + "): " + mismatch);
            }
            row++;
        }
        check(row == rows.size(), where + ": " + row + " rows, ringscan query " + rows.size());
    }

    /** Null when the column's value equals `want` (CSV text; empty for NULL), else why not. */
    static String compareValue(ResultSet rs, ResultSetMetaData md, int col, String want) throws SQLException {
        String text = rs.getString(col);
        if (rs.wasNull()) {
            return want.isEmpty() ? null : "NULL, ringscan query " + want;
        }
        if (want.isEmpty()) {
            return text + ", ringscan query NULL";
        }
        int type = md.getColumnType(col);
        switch (type) {
            case Types.BIGINT, Types.INTEGER, Types.SMALLINT -> {
                long got = rs.getLong(col);
                return got == Long.parseLong(want) ? null : got + ", ringscan query " + want;
            }
            case Types.DOUBLE, Types.FLOAT, Types.REAL -> {
                double got = rs.getDouble(col);
                double w = Double.parseDouble(want);
                boolean same = got == w || Math.abs(got - w) <= DOUBLE_TOLERANCE * Math.max(Math.abs(got), Math.abs(w));
                return same ? null : got + ", ringscan query " + want;
            }
            case Types.NUMERIC, Types.DECIMAL -> {
                BigDecimal got = rs.getBigDecimal(col);
                return got.compareTo(new BigDecimal(want)) == 0 ? null : got + ", ringscan query " + want;
            }
            case Types.TIMESTAMP, Types.TIMESTAMP_WITH_TIMEZONE -> {
                if (md.getColumnTypeName(col).equals("timestamptz")) {
                    Instant got = rs.getObject(col, OffsetDateTime.class).toInstant();
                    Instant w = parseCsvTimestamp(want).toInstant();
                    return got.equals(w) ? null : got + ", ringscan query " + want;
                }
                LocalDateTime got = rs.getObject(col, LocalDateTime.class);
                LocalDateTime w = LocalDateTime.parse(want.replace(' ', 'T'));
                return got.equals(w) ? null : got + ", ringscan query " + want;
            }
            case Types.BOOLEAN, Types.BIT -> {
                boolean got = rs.getBoolean(col);
                return Boolean.toString(got).equals(want) ? null : got + ", ringscan query " + want;
            }
            default -> {
                return text.equals(want) ? null : "'" + text + "', ringscan query '" + want + "'";
            }
        }
    }

    /** `2024-01-02 14:30:00[.ffffff]+00` (or `+05:30`), as `ringscan query --format csv` writes. */
    static OffsetDateTime parseCsvTimestamp(String s) {
        String iso = s.replace(' ', 'T');
        if (iso.matches(".*[+-]\\d\\d$")) {
            iso += ":00";
        }
        return OffsetDateTime.parse(iso);
    }

    /** RFC 4180: fields split by commas, quoted ones may hold commas, quotes (doubled) and newlines. */
    static List<List<String>> parseCsv(String text) {
        List<List<String>> rows = new ArrayList<>();
        List<String> row = new ArrayList<>();
        StringBuilder field = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < text.length(); i++) {
            char ch = text.charAt(i);
            if (quoted) {
                if (ch == '"' && i + 1 < text.length() && text.charAt(i + 1) == '"') {
                    field.append('"');
                    i++;
                } else if (ch == '"') {
                    quoted = false;
                } else {
                    field.append(ch);
                }
            } else if (ch == '"') {
                quoted = true;
            } else if (ch == ',') {
                row.add(field.toString());
                field.setLength(0);
            } else if (ch == '\n') {
                row.add(field.toString());
                field.setLength(0);
                rows.add(row);
                row = new ArrayList<>();
            } else if (ch != '\r') {
                field.append(ch);
            }
        }
        check(!quoted, "unterminated quote in the expected CSV");
        if (field.length() > 0 || !row.isEmpty()) {
            row.add(field.toString());
            rows.add(row);
        }
        return rows;
    }

    /**
     * Column names and JDBC types, from PreparedStatement.getMetaData (Parse and Describe,
     * nothing run) and from the ResultSet.
     */
    static void checkMetadata(Connection conn) throws SQLException {
        String sql = "SELECT count(*), max(close) AS close, symbol, min(ts) AS ts FROM ohlcv WHERE symbol = ? GROUP BY symbol";
        String[] names = {"count", "close", "symbol", "ts"};
        try (PreparedStatement stmt = conn.prepareStatement(sql)) {
            stmt.setString(1, "AAPL");
            ResultSetMetaData before = stmt.getMetaData();
            check(before != null, "PreparedStatement.getMetaData returned null");
            String described = checkColumns("PreparedStatement.getMetaData", before, names);
            try (ResultSet rs = stmt.executeQuery()) {
                String got = checkColumns("ResultSet.getMetaData", rs.getMetaData(), names);
                check(rs.next(), "metadata query: no row");
                check(rs.getLong(1) > 0, "metadata query: count " + rs.getLong(1));
                check(!rs.next(), "metadata query: more than one row");
                System.out.println("ok ResultSetMetaData: " + got + "; before executing: " + described);
            }
        }
    }

    static String checkColumns(String where, ResultSetMetaData md, String[] names) throws SQLException {
        check(md.getColumnCount() == names.length, where + ": " + md.getColumnCount() + " columns, wanted " + names.length);
        StringBuilder seen = new StringBuilder();
        for (int col = 1; col <= names.length; col++) {
            seen.append(col > 1 ? ", " : "").append(md.getColumnLabel(col)).append(' ')
                    .append(md.getColumnTypeName(col)).append('/').append(md.getColumnType(col));
        }
        String all = seen.toString();
        for (int col = 1; col <= names.length; col++) {
            check(md.getColumnLabel(col).equals(names[col - 1]), where + ": column " + col + " is named '"
                    + md.getColumnLabel(col) + "', wanted '" + names[col - 1] + "' (" + all + ")");
        }
        check(md.getColumnType(1) == Types.BIGINT, where + ": count(*) is not BIGINT (" + all + ")");
        check(md.getColumnType(2) == Types.DOUBLE, where + ": close is not DOUBLE (" + all + ")");
        check(md.getColumnType(3) == Types.VARCHAR, where + ": symbol is not VARCHAR (" + all + ")");
        int ts = md.getColumnType(4);
        check(ts == Types.TIMESTAMP_WITH_TIMEZONE || ts == Types.TIMESTAMP,
                where + ": ts is not TIMESTAMP[_WITH_TIMEZONE] (" + all + ")");
        return all;
    }

    /** A missing table is SQLSTATE 42P01, from a Statement and from a PreparedStatement; the connection lives on. */
    static void checkError(Connection conn) throws SQLException {
        String sql = "SELECT * FROM no_such_table";
        try (Statement stmt = conn.createStatement()) {
            stmt.executeQuery(sql).close();
            throw new CheckFailed(sql + " succeeded");
        } catch (SQLException e) {
            check("42P01".equals(e.getSQLState()), sql + ": SQLSTATE " + e.getSQLState() + ", wanted 42P01: " + e);
        }
        try (PreparedStatement stmt = conn.prepareStatement(sql)) {
            stmt.executeQuery().close();
            throw new CheckFailed(sql + " (prepared) succeeded");
        } catch (SQLException e) {
            check("42P01".equals(e.getSQLState()),
                    sql + " (prepared): SQLSTATE " + e.getSQLState() + ", wanted 42P01: " + e);
        }
        check(conn.isValid(10), "the connection is not valid after the error");
        try (Statement stmt = conn.createStatement(); ResultSet rs = stmt.executeQuery("SELECT count(*) FROM ohlcv")) {
            check(rs.next() && rs.getLong(1) > 0, "no count after the error");
            System.out.println("ok " + sql + " raised SQLException with SQLSTATE 42P01; the connection then counted "
                    + rs.getLong(1) + " rows");
        }
    }
}
