-- The tickets database, next to Airflow's metadata database `airflow` (see docker-compose.yml).
--
-- Run by the postgres image's entrypoint (psql, ON_ERROR_STOP) only when the data volume is first
-- initialised. The role name and password come from the container's environment (psql 15+ \getenv),
-- which docker-compose.yml sets from TICKETS_DB_USER and TICKETS_DB_PASSWORD in .env.

\getenv tickets_user TICKETS_DB_USER
\getenv tickets_password TICKETS_DB_PASSWORD

CREATE ROLE :"tickets_user" LOGIN PASSWORD :'tickets_password';
CREATE DATABASE tickets OWNER :"tickets_user";

-- Each database is for its owner (and the superuser `airflow`) only.
REVOKE ALL ON DATABASE tickets FROM PUBLIC;
REVOKE ALL ON DATABASE airflow FROM PUBLIC;
