-- App requests table: how many requests the filters of app_requests_page.sql keep.
SELECT count(*) AS n
FROM request_phases
WHERE t_arrival >= $since AND t_arrival < $until
    AND ($id_like = '' OR contains(request_id, $id_like))
    AND coalesce(e2e_ms, 0) >= $min_e2e_ms
    AND (NOT $errors_only OR error IS NOT NULL)
